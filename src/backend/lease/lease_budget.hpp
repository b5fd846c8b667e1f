#pragma once
// How a server-side lease is kept: when to renew, how far apart to retry, and when the child's
// stop must begin. The rule that makes a network lock safe:
//
//   The server cannot expire the lease before TTL has passed since it received our last
//   acknowledged renewal, which was after we sent it. So, measured on our monotonic clock,
//       lease-safe deadline = send time of the last acknowledged renewal + TTL - margin
//   (the margin, TTL/10, covers two clocks running at slightly different rates). The child tree
//   must be dead by then, so the stop begins one grace period (-kill-after) earlier.
//
// The budget is the time between a renewal falling due and the stop beginning. It is planned so
// that after any single failed renewal, -monitor-retry more attempts, at most 1 s apart, still
// start before the stop: renewals come every TTL/3 or sooner, and a short budget spaces the
// retries closer. Attempts go on until the stop begins; only that instant, or the server saying
// the lease is gone, ends the hold.
//
// A waiter has no child to stop: its lease only keeps its place in line, until the lease-safe
// deadline itself. So it renews less often (a fleet of waiters renews together, and every
// renewal is a request to the server), and its turn comes with a renewal made for the holder's
// budget when the last one is too old for it: the child never starts on a waiter's renewal.
#include <chrono>
#include <optional>
#include <string>

#include "util/deadline.hpp"

namespace lk {

struct LeaseTiming {
  std::chrono::nanoseconds ttl;
  std::chrono::nanoseconds renew_every;  // from the send of the last acknowledged renewal
  std::chrono::nanoseconds retry_every;  // between the starts of attempts after a failure
  std::chrono::nanoseconds stop_grace;   // how long stopping the child may take (-kill-after)
  int monitor_retry = 3;
  std::chrono::nanoseconds wait_renew_every{};  // while waiting in line; never below renew_every

  // Plans the budget for these flags. Retries go closer together when the budget is short, down
  // to 100ms apart; a -monitor-retry that does not fit even so gets as many as do (shortfall()
  // says so), and a budget with no room for a renewal at all is a UsageError naming the flags.
  static LeaseTiming plan(std::chrono::nanoseconds ttl, std::chrono::nanoseconds stop_grace,
                          int monitor_retry);

  enum class Phase { waiting, holding };

  std::chrono::nanoseconds margin() const { return ttl / 10; }
  std::chrono::nanoseconds safe() const { return ttl - margin(); }
  std::chrono::nanoseconds stop_after() const { return safe() - stop_grace; }
  // From the send of the last acknowledged renewal: when the next is due, and when the hold (or
  // the place in line) must be given up without one.
  std::chrono::nanoseconds renew_after(Phase phase) const;
  std::chrono::nanoseconds give_up_after(Phase phase) const;
  // How many retries after a failed renewal surely start before the stop.
  int guaranteed_retries() const;
  // What a user who asked for more retries than fit should be told, once.
  std::optional<std::string> shortfall() const;
  // Tells it, on stderr, as a run starts.
  void say_shortfall() const;
  // One line for -verbose: the whole budget, in the user's terms.
  std::string describe() const;
};

// When the next renewal attempt starts and when the stop must begin, as attempts succeed and
// fail. Pure bookkeeping on given instants, so that any pattern of faults can be replayed in a
// test without waiting for it.
class RenewalSchedule {
 public:
  using Phase = LeaseTiming::Phase;
  RenewalSchedule(const LeaseTiming& timing, Clock::time_point granted_at, Phase phase);

  Clock::time_point next_attempt() const { return next_; }
  // When the child's stop must begin (while waiting: when our place in line is given up).
  Clock::time_point stop_at() const { return last_ack_send_ + timing_.give_up_after(phase_); }
  Clock::time_point dead_by() const { return last_ack_send_ + timing_.safe(); }
  Clock::time_point last_ack_send() const { return last_ack_send_; }
  int failures() const { return failures_; }
  bool holding() const { return phase_ == Phase::holding; }
  // Our turn came at `now`: holds from now on if the last renewal fits the holder's budget, and
  // says so; if not, asks for a renewal at once, and holds once one sent from now is acknowledged.
  bool hold(Clock::time_point now);
  // How long an attempt started at `now` may wait for its answer: until the next one is due.
  std::chrono::milliseconds attempt_timeout(Clock::time_point now) const;

  void succeeded(Clock::time_point sent_at);
  // An attempt started at `started` failed at `now`; `retry_after` is the server's hint.
  void failed(Clock::time_point started, Clock::time_point now,
              std::optional<std::chrono::seconds> retry_after);

 private:
  LeaseTiming timing_;
  Clock::time_point last_ack_send_;
  Clock::time_point next_;
  int failures_ = 0;
  Phase phase_;
  std::optional<Clock::time_point> hold_asked_;  // our turn came then; a renewal is owed
};

}  // namespace lk
