#include "net/wake.hpp"

#include <poll.h>

#include "util/deadline.hpp"

namespace lk {

bool pause_unless_woken(std::chrono::milliseconds pause, const Wake* wake) {
  std::vector<pollfd> fds;
  if (wake)
    for (int fd : wake->fds) fds.push_back({fd, POLLIN, 0});
  auto end = Clock::now() + pause;
  for (auto left = pause; left.count() > 0;
       left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now())) {
    if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) > 0 && !wake->keep_going())
      return false;
  }
  return true;
}

}  // namespace lk
