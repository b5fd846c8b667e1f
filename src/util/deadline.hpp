#pragma once
#include <time.h>

#include <algorithm>
#include <chrono>
#include <optional>

namespace lk {

// The boot clock: monotonic like steady_clock, but it goes on counting while the machine is
// suspended, as a server's lease does. A deadline kept on the monotonic clock would look seconds
// away after a resume, although the server gave the lock to someone else long ago.
struct BootClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<BootClock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept {
    timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
  }
};

using Clock = BootClock;

// A point on the boot clock by which something must happen, or never.
class Deadline {
 public:
  static Deadline never() { return Deadline(); }
  // A duration too long to add to now (Go durations reach 292 years) is as good as never.
  static Deadline after(std::chrono::nanoseconds d) {
    auto now = Clock::now();
    if (d > Clock::time_point::max() - now) return never();
    return Deadline(now + d);
  }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  static Deadline earlier(const Deadline& a, const Deadline& b) {
    if (!a.at_) return b;
    if (!b.at_) return a;
    return *a.at_ < *b.at_ ? a : b;
  }

  // The time left, at most `cap` (all of it when there is no deadline).
  std::chrono::milliseconds left(std::chrono::milliseconds cap) const {
    if (!at_) return cap;
    auto l = std::chrono::duration_cast<std::chrono::milliseconds>(*at_ - Clock::now());
    return std::clamp(l, std::chrono::milliseconds(0), cap);
  }

  bool passed() const { return at_ && Clock::now() >= *at_; }
  bool is_never() const { return !at_; }
  std::optional<Clock::time_point> at() const { return at_; }

  // For ppoll(): nullptr waits forever; a past deadline gives a zero timeout. ppoll counts on the
  // monotonic clock, so a suspend makes such a wait end late: a wait that guards a lease deadline
  // uses a timer on the boot clock instead (see runner/watchdog_process.cpp).
  const timespec* remaining(timespec& storage) const {
    if (!at_) return nullptr;
    auto left = std::max(*at_ - Clock::now(), Clock::duration::zero());
    auto secs = std::chrono::duration_cast<std::chrono::seconds>(left);
    storage.tv_sec = secs.count();
    storage.tv_nsec = std::chrono::duration_cast<std::chrono::nanoseconds>(left - secs).count();
    return &storage;
  }

 private:
  Deadline() = default;
  std::optional<Clock::time_point> at_;
};

}  // namespace lk
