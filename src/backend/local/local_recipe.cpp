#include "backend/local/local_recipe.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/local/local_hold.hpp"
#include "backend/local/local_record.hpp"
#include "backend/local/local_ticket.hpp"
#include "backend/local/ofd_lock.hpp"
#include "backend/local/state_file.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"
#include "util/untrusted_file.hpp"

namespace lk {
namespace {

// The prefix is in use with another limit: refused in Consul's words, with what we know added.
void check_limit(int theirs, int ours) {
  if (theirs == 0 || theirs == ours) return;
  if (theirs > 1 && ours > 1) throw limit_conflict(theirs, ours);
  if (ours == 1)
    throw not_lock_use("the prefix is in use as a semaphore with -n " + std::to_string(theirs));
  throw not_semaphore_use("the prefix is in use as a lock");
}

// "; held by pid 12 on web1 since ..." for every live slot: what a user who timed out wants.
std::string describe_holders(const PrefixDir& dir) {
  std::string out;
  for (const auto& text : locked_contents(dir.fd(), "slot.")) {
    auto r = parse_record(text);
    out += (out.empty() ? "; held by " : ", ") + r.who();
  }
  return out;
}

// Step 2: returns once no live ticket is ahead of ours, false when the deadline passes first.
// With `held_too`, the holder's kept ticket counts as ahead.
bool wait_for_turn(const PrefixDir& dir, std::uint64_t mine, bool held_too, Deadline deadline,
                   const Interrupt& interrupt) {
  for (;;) {
    auto files = dir.tickets(held_too);
    auto ahead = std::find_if(files.begin(), files.end(), [&](const std::string& file) {
      return PrefixDir::ticket_number(file) >= mine;
    });
    UniqueFd just_ahead;
    while (ahead != files.begin() && !just_ahead) {
      const std::string& file = *--ahead;
      // Gone: it left while we looked, or became the holder's h.<n>, and then we are next. Not
      // a regular file, or one we may not open (every waiter's ticket is its user's alone, and
      // so another user's, a stranger in our state directory): no waiter of ours, whoever put
      // it there; neither waited for nor removed. Order among us is all a ticket keeps: the
      // slot locks of step 3 keep the exclusion.
      UniqueFd fd = open_untrusted_file(dir.fd(), file.c_str(), O_RDONLY);
      if (!fd && errno != ENOENT && errno != ENOTSUP && errno != EACCES && errno != EPERM)
        throw sys_error("cannot open " + dir.path(file));
      if (!fd) continue;
      if (!try_lock(fd.get(), LockKind::shared)) {
        just_ahead = std::move(fd);
      } else {
        // Tickets ahead of ours were locked before ours existed; an unlocked one was left by a
        // waiter (or holder) that died. Clear it, if it is our user's, so that nobody looks at
        // it again.
        remove_if_ours(dir.fd(), file.c_str());
      }
    }
    if (!just_ahead) return true;
    LockTarget target{just_ahead.get(), LockKind::shared};
    if (!lock_any({&target, 1}, deadline, interrupt)) return false;
  }
}

UniqueFd open_slot(const PrefixDir& dir, int slot) {
  std::string file = PrefixDir::slot_file(slot);
  UniqueFd fd = open_untrusted_file(dir.fd(), file.c_str(), O_RDWR | O_CREAT);
  if (!fd) throw state_file_error(dir.path(file));
  return fd;
}

}  // namespace

void check_limit_fits(int limit) {
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur != RLIM_INFINITY && static_cast<rlim_t>(limit) + 64 > files.rlim_cur)
    throw UsageError("-n " + std::to_string(limit) + " needs more open files than the limit of " +
                     std::to_string(files.rlim_cur) + " (ulimit -n)");
}

std::unique_ptr<Hold> take_turn(PrefixDir& dir, const LockSpec& spec, Deadline deadline,
                                const Interrupt& interrupt, const Queued& queued) {
  auto waiter = HolderRecord::for_this_process(spec.prefix, spec.session_name);

  // Step 1.
  Meta meta = dir.read_meta();
  if (meta.limit != spec.limit && meta.limit != 0 && dir.remove_if_idle()) return nullptr;
  check_limit(meta.limit, spec.limit);
  bool limit_is_new = meta.limit == 0;
  meta.limit = spec.limit;
  // Nobody waits: a free slot is ours at once, without a ticket (the uncontended path).
  if (dir.tickets().empty()) {
    for (int i = 0; i < spec.limit; ++i) {
      UniqueFd fd = open_slot(dir, i);
      if (!try_lock(fd.get(), LockKind::exclusive)) continue;
      if (limit_is_new) dir.write_meta(meta);
      return hold_slot(dir, i, std::move(fd), std::nullopt, waiter, deadline, interrupt);
    }
  }
  Ticket ticket(dir, meta, waiter);
  dir.unlock_meta();
  queued();
  auto timed_out = [&] {
    return AcquireTimeout("timed out waiting for prefix '" + printable(spec.prefix) + "'" +
                          describe_holders(dir));
  };

  // Step 2.
  if (verbose_enabled())  // reading the records costs a look at every slot: only when asked
    verbose("prefix '{}' is busy{}; waiting in line with ticket {}", printable(spec.prefix),
            describe_holders(dir), ticket.number());
  bool kept = spec.limit == 1;
  if (!wait_for_turn(dir, ticket.number(), kept, deadline, interrupt)) throw timed_out();

  // Step 3.
  std::vector<UniqueFd> slots;
  std::vector<LockTarget> targets;
  for (int i = 0; i < spec.limit; ++i) {
    slots.push_back(open_slot(dir, i));
    targets.push_back({slots.back().get(), LockKind::exclusive});
  }
  auto slot = lock_any(targets, deadline, interrupt);
  if (!slot) throw timed_out();

  // Step 4.
  if (!dir.lock_meta(deadline, interrupt)) throw timed_out();
  std::optional<Ticket> place;
  if (kept) {
    ticket.hold();
    place.emplace(std::move(ticket));
  } else {
    ticket.leave();
  }
  return hold_slot(dir, static_cast<int>(*slot), std::move(slots[*slot]), std::move(place), waiter,
                   deadline, interrupt);
}

}  // namespace lk
