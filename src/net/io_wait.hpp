#pragma once
// Waits for a socket to be ready within one request's deadline, and lets our own descriptors
// (signals, the lease keeper) cut the wait short.
#include <chrono>
#include <functional>
#include <vector>

#include "util/deadline.hpp"

namespace lk {

class IoWait {
 public:
  // `keep_going` is asked whenever one of `wake_fds` is readable, and at least once a second.
  IoWait(Deadline deadline, std::vector<int> wake_fds, std::function<bool()> keep_going);

  // Until `fd` is ready for `events` (POLLIN, POLLOUT), or has failed. False when keep_going said
  // to stop; throws NetworkError once the deadline has passed.
  bool ready(int fd, short events);

  Deadline deadline() const { return deadline_; }
  void set_deadline(Deadline deadline) { deadline_ = deadline; }

 private:
  Deadline deadline_;
  Clock::time_point started_;
  std::vector<int> wake_fds_;
  std::function<bool()> keep_going_;
  Clock::time_point asked_;
};

}  // namespace lk
