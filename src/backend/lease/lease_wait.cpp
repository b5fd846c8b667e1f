#include "backend/lease/lease_wait.hpp"

#include <poll.h>

#include "util/deadline_timer.hpp"

namespace lk {

LeaseWait::LeaseWait(Deadline deadline, const Interrupt& interrupt, LeaseKeeper& keeper)
    : deadline_(deadline),
      interrupt_(interrupt),
      keeper_(keeper),
      timer_(deadline_timer(deadline)) {}

bool LeaseWait::keep_going() {
  if (why_ != Why::none) return false;
  if (deadline_.passed()) why_ = Why::timeout;
  else if (keeper_.reason()) why_ = Why::lost;
  else if (!interrupt_.keep_going_if_woken()) why_ = Why::interrupted;
  return why_ == Why::none;
}

Wake LeaseWait::wake() {
  return {{timer_.get(), interrupt_.fd, keeper_.loss_fd()}, [this] { return keep_going(); }};
}

bool LeaseWait::lease_fit_to_hold() {
  if (keeper_.start_holding()) return true;
  while (keep_going()) {
    pollfd fds[] = {{timer_.get(), POLLIN, 0},
                    {interrupt_.fd, POLLIN, 0},
                    {keeper_.loss_fd(), POLLIN, 0},
                    {keeper_.held_fd(), POLLIN, 0}};
    poll(fds, 4, -1);
    if (fds[3].revents) return true;
  }
  return false;
}

void LeaseWait::pause(std::chrono::milliseconds pause) {
  pollfd fds[] = {
      {timer_.get(), POLLIN, 0}, {interrupt_.fd, POLLIN, 0}, {keeper_.loss_fd(), POLLIN, 0}};
  poll(fds, 3, static_cast<int>(pause.count()));  // negative descriptors are skipped
}

}  // namespace lk
