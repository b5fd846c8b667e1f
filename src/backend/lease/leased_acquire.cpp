#include "backend/lease/leased_acquire.hpp"

#include "util/printable.hpp"

namespace lk {
namespace {

AcquireTimeout timed_out(const std::string& prefix) {
  return AcquireTimeout("timed out waiting for prefix '" + printable(prefix) + "'");
}

Interrupted interrupted() { return Interrupted("interrupted while waiting for the lock"); }

LeaseKeeper& open_lease(const LeasedRecipe& recipe, const Interrupt& interrupt) {
  Wake wake = interrupt.wake();
  try {
    return recipe.open_lease(wake);
  } catch (const Cancelled&) {
    throw interrupted();  // while connecting, only a stop signal wakes the wait
  }
}

// The contention's wait, up to the hold; null when the wait ended first.
std::unique_ptr<Hold> take_turn(const LockSpec& spec, LeaseWait& wait, Contention& contention,
                                const Queued& queued) {
  try {
    bool turn = spec.limit == 1 ? contention.lock(queued) : contention.semaphore(queued);
    if (turn && wait.lease_fit_to_hold()) return contention.hold();
  } catch (const Cancelled&) {
    // The wait said stop, and knows why.
  }
  return nullptr;
}

[[noreturn]] void throw_why(const LeaseWait& wait, const LeaseKeeper& keeper,
                            const std::string& prefix) {
  switch (wait.why()) {
    case LeaseWait::Why::timeout: throw timed_out(prefix);
    case LeaseWait::Why::interrupted: throw interrupted();
    default: throw Error("lost our place in line: " + keeper.reason().value_or("the lease ended"));
  }
}

}  // namespace

std::unique_ptr<Hold> leased_acquire(const LockSpec& spec, Deadline deadline,
                                     const Interrupt& interrupt, const Queued& queued,
                                     const LeasedRecipe& recipe) {
  try {
    LeaseKeeper& keeper = open_lease(recipe, interrupt);
    LeaseWait wait(deadline, interrupt, keeper);
    std::unique_ptr<Contention> contention = recipe.contend(wait);
    if (auto hold = take_turn(spec, wait, *contention, queued)) return hold;
    contention->leave();
    throw_why(wait, keeper, spec.prefix);
  } catch (const NetworkError&) {
    if (recipe.deadline_ends_requests && deadline.passed()) throw timed_out(spec.prefix);
    throw;
  }
}

}  // namespace lk
