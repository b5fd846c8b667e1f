#pragma once
// The unit's side of systemd's notification protocol (sd_notify(3)): each message is one datagram
// of "KEY=value" lines to the socket named by NOTIFY_SOCKET. `lock` stays the unit's main process
// and its only notifier: the child never sees the variables. Without NOTIFY_SOCKET every call is
// a no-op and nothing is opened.
#include <chrono>
#include <optional>
#include <string>

#include "util/deadline.hpp"
#include "util/unique_fd.hpp"

namespace lk {

class SystemdNotify {
 public:
  // Takes NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID out of the environment, set or not.
  SystemdNotify();
  // Only takes them out: for a process that must not pass them on but never notifies.
  static void forget_environment();
  explicit operator bool() const { return static_cast<bool>(socket_); }

  // STATUS= only when the text changed, so that a periodic refresh costs systemd nothing.
  void status(const std::string& text);
  void ready();  // once
  // STOPPING=1 the first time, with the status each time.
  void stopping(const std::string& status);

  // Readable when a watchdog ping or a refresh of the status may be due; -1 when neither can be.
  int timer_fd() const { return timer_.get(); }
  // Call when timer_fd() is readable: pings the watchdog if systemd asked for pings; returns
  // whether the status is due for a refresh (every 2 s).
  bool tick();

 private:
  void send(const std::string& message);

  UniqueFd socket_, timer_;
  std::string address_;  // for messages; sockaddr_un built at each send
  std::string last_status_;
  bool ready_sent_ = false;
  bool stopping_sent_ = false;
  bool send_failed_ = false;
  std::optional<std::chrono::microseconds> watchdog_;
  Deadline next_refresh_ = Deadline::never();
};

}  // namespace lk
