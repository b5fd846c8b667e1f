#pragma once
// How every leased backend (Consul, etcd, ZooKeeper) acquires, in one place: it makes the lease,
// waits for a turn on it with the backend's own recipe (its contention), makes sure the lease
// fits a holder, and hands the lease to the hold. A backend supplies only the lease and the
// contention; the shared errors (AcquireTimeout, Interrupted, Error with the lease's loss) are
// told here, and nowhere below.
//
// What a Cancelled means. A Cancelled comes from a request or a wait cut short because what may
// wake it said stop: the LeaseWait's wake (its deadline timer, the interrupt's descriptor, the
// lease's loss descriptor) or, before the wait exists, the connect wake (the interrupt's alone:
// the backend bounds its connect by the deadline itself, and a connect the deadline ends fails
// as a NetworkError). So a Cancelled carries no reason: the one who knows why is the LeaseWait,
// or, while connecting, the interrupt (a stop signal). Only this skeleton asks them; below it, a
// Cancelled passes through, and a hold's own thread checks its stop before it decides anything.
#include <functional>
#include <memory>

#include "backend/backend.hpp"
#include "backend/lease/lease_keeper.hpp"
#include "backend/lease/lease_wait.hpp"

namespace lk {

// A backend's recipe for one acquisition, on a lease made for it: the routine that waits for a
// turn, as its upstream client does it, for a lock and for a semaphore. Each may throw Cancelled
// (see above), NetworkError, or Error for anything that ends the acquisition for good.
class Contention {
 public:
  virtual ~Contention() = default;
  // True once our turn came (one slot of one, or of spec.limit); false when the wait ended first.
  // `queued` is called once we wait in line.
  virtual bool lock(const Queued& queued) = 0;
  virtual bool semaphore(const Queued& queued) = 0;
  // Our turn came and the lease is fit to hold: the hold, which takes the lease along. Null when
  // the wait ended first.
  virtual std::unique_ptr<Hold> hold() = 0;
  // The wait ended without a hold: leaves the line at once, within kReleaseBudget, rather than
  // when the lease ends.
  virtual void leave() {}
};

// What a leased backend supplies.
struct LeasedRecipe {
  // Makes the lease, keeping it for contend(), and returns its keeper. `wake` cuts a wait short
  // (Cancelled): only a stop signal sets it off.
  std::function<LeaseKeeper&(const Wake& wake)> open_lease;
  // The contention on that lease, waiting through `wait`.
  std::function<std::unique_ptr<Contention>(LeaseWait& wait)> contend;
  // -timeout's deadline cuts the backend's requests short (etcd's; ZooKeeper's connect): a
  // NetworkError once it passed is the timeout, not a fault of the server's.
  bool deadline_ends_requests = false;
};

// Backend::acquire for a leased backend.
std::unique_ptr<Hold> leased_acquire(const LockSpec& spec, Deadline deadline,
                                     const Interrupt& interrupt, const Queued& queued,
                                     const LeasedRecipe& recipe);

}  // namespace lk
