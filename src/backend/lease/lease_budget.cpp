#include "backend/lease/lease_budget.hpp"

#include <fmt/format.h>

#include "util/duration.hpp"
#include "util/error.hpp"

namespace lk {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

namespace {

// Closer than this, retries would mostly measure the round trip, not ride anything out.
constexpr nanoseconds kMinRetrySpacing = milliseconds(100);
constexpr nanoseconds kRetrySpacing = std::chrono::seconds(1);

std::string go(nanoseconds d) { return format_go_duration(d); }

}  // namespace

LeaseTiming LeaseTiming::plan(nanoseconds ttl, nanoseconds stop_grace, int monitor_retry) {
  LeaseTiming t{ttl, ttl / 3, kRetrySpacing, stop_grace, monitor_retry};
  nanoseconds budget = t.stop_after();
  if (budget <= nanoseconds(0))
    throw UsageError(fmt::format(
        "-kill-after {} does not fit in -session-ttl {}: the child must be dead within {} of the "
        "last confirmed renewal (the TTL less a tenth) and stopping it may take all of "
        "-kill-after; use a longer -session-ttl or a shorter -kill-after",
        go(stop_grace), go(ttl), go(t.safe())));
  // Room for the retries after a renewal falls due, and half a spacing for the last to finish.
  nanoseconds retries = monitor_retry * kRetrySpacing + kRetrySpacing / 2;
  t.renew_every = std::min(ttl / 3, budget - retries);
  // A waiter's retries run until the lease-safe deadline, at TTL/2 at the latest, as api.Lock
  // renews its session.
  t.wait_renew_every = std::min(ttl / 2, t.safe() - retries);
  if (t.renew_every < kRetrySpacing / 2) {  // a short budget: retries closer together
    t.retry_every = budget / (monitor_retry + 1);
    t.renew_every = t.retry_every / 2;
  }
  if (t.retry_every < kMinRetrySpacing) {  // not all the retries fit: as many as do
    t.retry_every = kMinRetrySpacing;
    t.renew_every = t.retry_every / 2;
    if (budget < t.renew_every + t.retry_every / 2)
      throw UsageError(fmt::format(
          "-session-ttl {} with -kill-after {} leaves {} between a renewal and the child's stop, "
          "too little to renew in; use a longer -session-ttl or a shorter -kill-after",
          go(ttl), go(stop_grace), go(budget)));
  }
  t.wait_renew_every = std::max(t.wait_renew_every, t.renew_every);
  return t;
}

nanoseconds LeaseTiming::renew_after(Phase phase) const {
  return phase == Phase::holding ? renew_every : std::max(renew_every, wait_renew_every);
}

nanoseconds LeaseTiming::give_up_after(Phase phase) const {
  return phase == Phase::holding ? stop_after() : safe();
}

int LeaseTiming::guaranteed_retries() const {
  return static_cast<int>((stop_after() - renew_every - retry_every / 2) / retry_every);
}

std::optional<std::string> LeaseTiming::shortfall() const {
  if (guaranteed_retries() >= monitor_retry) return std::nullopt;
  return fmt::format(
      "-monitor-retry {} does not fit in the {} between a renewal and the child's stop "
      "(-session-ttl {} less a 10% margin and -kill-after {}); {} retries, {} apart, do",
      monitor_retry, go(stop_after()), go(ttl), go(stop_grace), guaranteed_retries(),
      go(retry_every));
}

void LeaseTiming::say_shortfall() const {
  if (auto said = shortfall()) fmt::print(stderr, "lock: {}\n", *said);
}

std::string LeaseTiming::describe() const {
  return fmt::format(
      "lease budget: TTL {}; renewing every {} ({} while waiting in line); without a confirmed "
      "renewal the child's stop begins {} after the last one (TTL less {} margin and {} "
      "-kill-after) and it is dead by {}; failed renewals are retried every {} until then ({} "
      "retries guaranteed, -monitor-retry {})",
      go(ttl), go(renew_every), go(renew_after(Phase::waiting)), go(stop_after()), go(margin()),
      go(stop_grace), go(safe()), go(retry_every), guaranteed_retries(), monitor_retry);
}

RenewalSchedule::RenewalSchedule(const LeaseTiming& timing, Clock::time_point granted_at,
                                 Phase phase)
    : timing_(timing),
      last_ack_send_(granted_at),
      next_(granted_at + timing.renew_after(phase)),
      phase_(phase) {}

bool RenewalSchedule::hold(Clock::time_point now) {
  if (phase_ == Phase::holding) return true;
  if (now < last_ack_send_ + timing_.renew_every) {
    phase_ = Phase::holding;
    next_ = last_ack_send_ + timing_.renew_every;
    return true;
  }
  hold_asked_ = now;
  next_ = std::min(next_, now);
  return false;
}

milliseconds RenewalSchedule::attempt_timeout(Clock::time_point now) const {
  auto until = std::min(now + timing_.retry_every, stop_at());
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(until - now));
}

void RenewalSchedule::succeeded(Clock::time_point sent_at) {
  last_ack_send_ = std::max(last_ack_send_, sent_at);
  failures_ = 0;
  if (hold_asked_ && sent_at >= *hold_asked_) {
    phase_ = Phase::holding;
    hold_asked_.reset();
  }
  // A renewal sent before our turn came does not count for it: another goes at once.
  next_ = hold_asked_ ? sent_at : last_ack_send_ + timing_.renew_after(phase_);
}

void RenewalSchedule::failed(Clock::time_point started, Clock::time_point now,
                             std::optional<std::chrono::seconds> retry_after) {
  // The first retry goes at once: a connection the server closed while idle fails fast and a new
  // one may well work. Later ones keep to the spacing the budget was planned with.
  next_ = ++failures_ == 1 ? now : std::max(now, started + timing_.retry_every);
  if (retry_after) {
    // The server's hint, as far as the budget allows: the last attempt must still fit.
    auto latest = stop_at() - timing_.retry_every / 2;
    next_ = std::max(next_, std::min(now + *retry_after, latest));
  }
}

}  // namespace lk
