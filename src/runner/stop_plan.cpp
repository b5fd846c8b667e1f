#include "runner/stop_plan.hpp"

#include <algorithm>

namespace lk {

using std::chrono::milliseconds;

void StopPlan::lease(Clock::time_point dead_by) {
  if (!dead_by_ || dead_by > *dead_by_) dead_by_ = dead_by;
}

void StopPlan::stopping(Clock::time_point now) {
  if (!stop_begun_) stop_begun_ = now;
}

std::optional<Clock::time_point> StopPlan::stop_at() const {
  if (!dead_by_) return std::nullopt;
  Clock::duration locks_turn = std::min<Clock::duration>(kill_after_ / 10, milliseconds(100));
  return *dead_by_ - kill_after_ + locks_turn;
}

std::optional<Clock::time_point> StopPlan::kill_at() const {
  std::optional<Clock::time_point> at = dead_by_;
  if (stop_begun_) at = std::min(at.value_or(Clock::time_point::max()), *stop_begun_ + kill_after_);
  return at;
}

bool StopPlan::stop_due(Clock::time_point now) const {
  auto at = stop_at();
  return !stop_begun_ && ((at && now >= *at) || kill_due(now));
}

bool StopPlan::kill_due(Clock::time_point now) const {
  auto at = kill_at();
  return !killing_ && at && now >= *at;
}

std::optional<Clock::time_point> StopPlan::next() const {
  std::optional<Clock::time_point> next;
  auto earlier = [&](std::optional<Clock::time_point> t) {
    if (t && (!next || *t < *next)) next = t;
  };
  if (!stop_begun_) earlier(stop_at());
  if (!killing_) earlier(kill_at());
  return next;
}

}  // namespace lk
