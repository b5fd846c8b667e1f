#include "runner/wait_notice.hpp"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cstdint>

#include "util/error.hpp"

namespace lk {

WaitNotice::WaitNotice(int signals_fd, int also_fd, std::chrono::seconds after)
    : poll_(epoll_create1(EPOLL_CLOEXEC)) {
  if (!poll_) throw sys_error("epoll");
  epoll_event in{};
  in.events = EPOLLIN;
  epoll_ctl(poll_.get(), EPOLL_CTL_ADD, signals_fd, &in);
  if (also_fd >= 0) epoll_ctl(poll_.get(), EPOLL_CTL_ADD, also_fd, &in);
  if (!isatty(STDERR_FILENO)) return;
  timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  itimerspec when{};
  when.it_value.tv_sec = after.count();
  if (!timer_ || timerfd_settime(timer_.get(), 0, &when, nullptr) < 0) return;  // no notice
  epoll_ctl(poll_.get(), EPOLL_CTL_ADD, timer_.get(), &in);
}

void WaitNotice::maybe_print(const std::function<std::string()>& what) {
  std::uint64_t expirations;
  if (!timer_ || read(timer_.get(), &expirations, sizeof expirations) != sizeof expirations) return;
  epoll_ctl(poll_.get(), EPOLL_CTL_DEL, timer_.get(), nullptr);
  timer_.reset();
  std::string line = "lock: " + what() + "\n";
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace lk
