#include "runner/min_hold.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "util/log.hpp"

namespace lk {
namespace {

// `until` on the wall clock, rounded up to the second: never earlier than the hold's end. The
// flag's range keeps it within the clock as lock starts; a wait of as long as that range's
// slack saturates it, rather than wrap it around to the 17th century.
std::string utc_text_of(Clock::time_point until) {
  using namespace std::chrono;
  auto now = system_clock::now();
  system_clock::duration room = floor<seconds>(system_clock::time_point::max() - now) - 1s;
  auto left = std::min(duration_cast<system_clock::duration>(until - Clock::now()), room);
  return HolderRecord::utc_text(ceil<seconds>(now + left));
}

}  // namespace

std::optional<std::string> keep_until(Clock::time_point until, Hold& hold, Signals& signals,
                                      SystemdNotify& systemd) {
  Deadline deadline(until);
  if (deadline.passed()) return std::nullopt;
  std::string text = utc_text_of(until);
  try {
    hold.hold_until(text);
  } catch (const Error& e) {  // only -status's view of the hold is lost
    verbose("could not write the record of the hold again: {}", e.what());
  }
  verbose("the child has gone; holding the lock until {} (-min-hold)", text);
  systemd.status("held until " + text + " (-min-hold)");
  while (!deadline.passed()) {
    pollfd fds[3] = {
        {signals.fd(), POLLIN, 0}, {hold.loss_fd(), POLLIN, 0}, {systemd.timer_fd(), POLLIN, 0}};
    timespec ts;
    int n = ppoll(fds, 3, deadline.remaining(ts), nullptr);
    if (n < 0 && errno != EINTR) throw sys_error("poll");
    if (n <= 0) continue;
    if (fds[0].revents & POLLIN)
      for (int sig : signals.take())
        if (Signals::is_stop(sig)) {
          verbose("received {}; releasing the lock before -min-hold's end", signal_name(sig));
          return std::nullopt;
        }
    if (fds[1].revents)
      if (auto why = hold.check_loss()) return why;
    if (fds[2].revents) systemd.tick();
  }
  return std::nullopt;
}

}  // namespace lk
