#pragma once
// When the watchdog acts on the child tree, as arithmetic on instants of the boot clock (which
// counts a suspend as time passed, as the server does):
//
//   D     the lease-safe deadline, published by lock at every confirmed renewal (lease_budget.hpp:
//         send time of the last acknowledged renewal + TTL - margin); never, without a lease.
//   stop  at D - kill_after + lock's turn, unless the stop has begun: SIGTERM, then SIGCONT so
//         that a stopped tree can act on it.
//   kill  at min(the stop's start + kill_after, D): SIGKILL, at D at the latest. (A process in
//         uninterruptible sleep dies when it wakes; without /proc, one that left the child's group
//         when a scan finds it: tree.hpp.)
//
// lock begins the stop itself at D - kill_after, when it runs, so that its message and systemd's
// STOPPING=1 come before the child hears anything. The watchdog leaves it that turn (a tenth of
// -kill-after, at most 100ms) and takes the stop over only from a lock that did not (stopped,
// paused, starved or wedged); the kill at D does not wait for anyone.
//
// A stop that lock asks for (a signal, the lease lost, the child's end) begins at once and kills
// at the same bound. Pure bookkeeping on given instants, so that tests replay any pattern of
// renewals, pauses and suspends without waiting for it.
#include <chrono>
#include <optional>

#include "util/deadline.hpp"

namespace lk {

class StopPlan {
 public:
  explicit StopPlan(Clock::duration kill_after) : kill_after_(kill_after) {}

  // A deadline published by lock; an earlier one than known (read out of order) changes nothing.
  void lease(Clock::time_point dead_by);
  // The stop began at `now` (asked for, or our own).
  void stopping(Clock::time_point now);
  void killing() { killing_ = true; }

  bool stop_begun() const { return stop_begun_.has_value(); }
  // What is due at `now`: the stop (only while it has not begun), then the kill.
  bool stop_due(Clock::time_point now) const;
  bool kill_due(Clock::time_point now) const;
  // When the next of them falls due, if ever.
  std::optional<Clock::time_point> next() const;
  std::optional<Clock::time_point> dead_by() const { return dead_by_; }
  // The instant the watchdog takes the stop over, if lock has not begun it.
  std::optional<Clock::time_point> stop_at() const;

 private:
  std::optional<Clock::time_point> kill_at() const;

  Clock::duration kill_after_;
  std::optional<Clock::time_point> dead_by_;
  std::optional<Clock::time_point> stop_begun_;
  bool killing_ = false;
};

}  // namespace lk
