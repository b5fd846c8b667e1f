#include "net/io_wait.hpp"

#include <poll.h>

#include <cerrno>
#include <cstring>

#include "net/wake.hpp"

namespace lk {

using std::chrono::milliseconds;

IoWait::IoWait(Deadline deadline, std::vector<int> wake_fds, std::function<bool()> keep_going)
    : deadline_(deadline),
      started_(Clock::now()),
      wake_fds_(std::move(wake_fds)),
      keep_going_(std::move(keep_going)),
      asked_(started_) {}

bool IoWait::ready(int fd, short events) {
  std::vector<pollfd> fds{{fd, events, 0}};
  for (int w : wake_fds_) fds.push_back({w, POLLIN, 0});
  for (;;) {
    if (deadline_.passed()) {
      auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - started_);
      throw NetworkError("timed out after " + std::to_string(took.count()) + " ms");
    }
    auto slice = deadline_.left(milliseconds(1000));
    int n =
        poll(fds.data(), fds.size(), static_cast<int>(std::max(slice, milliseconds(1)).count()));
    if (n < 0 && errno != EINTR) throw NetworkError(std::string("poll: ") + std::strerror(errno));
    bool woken = false;
    for (std::size_t i = 1; i < fds.size(); ++i) woken |= fds[i].revents != 0;  // an error too
    auto now = Clock::now();
    if (woken || now - asked_ >= std::chrono::seconds(1)) {
      asked_ = now;
      if (!keep_going_()) return false;
    }
    if (fds[0].revents != 0) return true;  // ready, or failed: the next read or write says which
  }
}

}  // namespace lk
