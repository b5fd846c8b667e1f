#pragma once
// Waiting for a turn on a server, as every leased backend does (leased_acquire.hpp): until
// -timeout's deadline, a signal that says stop, or the loss of the lease that carries our place
// in line. Long requests (blocking queries, watches) wake on the same events through wake().
#include <chrono>

#include "backend/backend.hpp"
#include "backend/lease/lease_keeper.hpp"
#include "net/wake.hpp"
#include "util/unique_fd.hpp"

namespace lk {

class LeaseWait {
 public:
  LeaseWait(Deadline deadline, const Interrupt& interrupt, LeaseKeeper& keeper);

  // False once the wait is over, for whichever reason came first.
  bool keep_going();
  Wake wake();
  // At our turn: true once the lease is kept for a holder (lease_keeper.hpp), at once or after a
  // renewal; false if the wait ended first.
  bool lease_fit_to_hold();
  // Sleeps for `pause`, or less when the wait is over meanwhile.
  void pause(std::chrono::milliseconds pause);

  enum class Why { none, timeout, interrupted, lost };
  // What ended the wait; none while it goes on. For `lost`, the keeper's reason() says more.
  Why why() const { return why_; }

 private:
  Deadline deadline_;
  const Interrupt& interrupt_;
  LeaseKeeper& keeper_;
  UniqueFd timer_;  // readable at the deadline
  Why why_ = Why::none;
};

}  // namespace lk
