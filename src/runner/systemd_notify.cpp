#include "runner/systemd_notify.hpp"

#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

using namespace std::chrono_literals;

constexpr auto kRefreshEvery = 2s;

// The variable's value, removed from the environment so that no child inherits it.
std::string take_env(const char* name) {
  const char* value = std::getenv(name);
  std::string out = value ? value : "";
  unsetenv(name);
  return out;
}

// WATCHDOG_USEC, when systemd asks us (not another process of the unit) for pings.
std::optional<std::chrono::microseconds> watchdog_interval(const std::string& usec,
                                                           const std::string& pid) {
  if (!pid.empty() && pid != std::to_string(getpid())) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(usec.c_str(), &end, 10);
  if (usec.empty() || *end || errno || n == 0) return std::nullopt;
  return std::chrono::microseconds(n);
}

timespec to_timespec(std::chrono::nanoseconds d) {
  return {static_cast<time_t>(d.count() / 1'000'000'000), d.count() % 1'000'000'000};
}

// Each assignment is one line of the datagram.
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

}  // namespace

void SystemdNotify::forget_environment() {
  for (const char* name : {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"}) unsetenv(name);
}

SystemdNotify::SystemdNotify() {
  std::string address = take_env("NOTIFY_SOCKET");
  std::string usec = take_env("WATCHDOG_USEC"), pid = take_env("WATCHDOG_PID");
  if (address.empty()) return;
  // A path, or '@' for the abstract namespace; systemd's other kinds (vsock) are not ours to reach.
  if ((address[0] != '/' && address[0] != '@') || address.size() > sizeof(sockaddr_un{}.sun_path)) {
    verbose("NOTIFY_SOCKET={} is not a unix socket address lock can use; not notifying systemd",
            printable(address));
    return;
  }
  socket_.reset(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!socket_) {
    verbose("cannot notify systemd: socket: {}", std::strerror(errno));
    return;
  }
  address_ = address;
  watchdog_ = watchdog_interval(usec, pid);
  // Pings at half the interval, as sd_watchdog_enabled(3) advises; refreshes every 2 s at most.
  // Half of 1 µs is rounded up: a zero would disarm the timer, and with it every ping.
  std::chrono::nanoseconds every = kRefreshEvery;
  if (watchdog_)
    every = std::min<std::chrono::nanoseconds>(
        every, std::max(*watchdog_ / 2, std::chrono::microseconds(1)));
  timer_.reset(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  itimerspec when{};
  auto first = std::min<std::chrono::nanoseconds>(every, 500ms);
  when.it_value = to_timespec(first);
  when.it_interval = to_timespec(every);
  if (!timer_ || timerfd_settime(timer_.get(), 0, &when, nullptr) < 0) {
    verbose("cannot notify systemd: timerfd: {}", std::strerror(errno));
    socket_.reset();
    timer_.reset();
    return;
  }
  // Holders are looked up from 0.5 s into a wait on: a short wait costs no lookup.
  next_refresh_ = Deadline::after(500ms - first / 2);
  verbose("notifying systemd at {}{}", printable(address_),
          watchdog_ ? fmt::format(", watchdog pings every {} ms", watchdog_->count() / 2000) : "");
}

void SystemdNotify::status(const std::string& text) {
  std::string line = one_line(text);
  if (!socket_ || line == last_status_) return;
  last_status_ = line;
  send("STATUS=" + line);
}

void SystemdNotify::ready() {
  if (!socket_ || ready_sent_) return;
  ready_sent_ = true;
  send("READY=1");
}

void SystemdNotify::stopping(const std::string& status) {
  if (!socket_) return;
  last_status_ = one_line(status);
  send((std::exchange(stopping_sent_, true) ? "" : "STOPPING=1\n") + ("STATUS=" + last_status_));
}

bool SystemdNotify::tick() {
  std::uint64_t expirations;
  if (!timer_ || read(timer_.get(), &expirations, sizeof expirations) != sizeof expirations)
    return false;
  if (watchdog_) send("WATCHDOG=1");
  if (!next_refresh_.passed()) return false;
  next_refresh_ = Deadline::after(kRefreshEvery - 100ms);  // the tick that comes 2 s later
  return true;
}

// Never an error for the child: a socket that is gone or refuses is noted once, with -verbose.
// MSG_DONTWAIT: a receiver that does not read must not wedge the supervisor.
void SystemdNotify::send(const std::string& message) {
  sockaddr_un to{};
  to.sun_family = AF_UNIX;
  std::memcpy(to.sun_path, address_.data(), address_.size());
  if (to.sun_path[0] == '@') to.sun_path[0] = '\0';
  auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size());
  if (sendto(socket_.get(), message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT,
             reinterpret_cast<sockaddr*>(&to), length) < 0 &&
      !send_failed_) {
    send_failed_ = true;
    verbose("cannot notify systemd at {}: {}", printable(address_), std::strerror(errno));
  }
}

}  // namespace lk
