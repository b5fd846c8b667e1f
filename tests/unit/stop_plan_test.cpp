#include "runner/stop_plan.hpp"

#include <doctest/doctest.h>

#include <optional>
#include <vector>

using namespace std::chrono_literals;
using lk::Clock;
using lk::StopPlan;

namespace {

const Clock::time_point kStart = Clock::time_point{} + 1h;

// The lease of these tests: TTL 10s, so a renewal sent at t makes the deadline t + 9s.
constexpr auto kSafe = 9s;

struct Suspend {
  Clock::time_point from;  // on the boot clock
  Clock::duration length;
};

struct Acts {
  std::optional<Clock::time_point> stopped, killed;  // on the boot clock
};

// The watchdog's loop on an injected clock. Each turn it reads the published deadline, acts on
// what is due, and waits until the plan's next instant (or lock's next renewal, which publishes
// deadline d at d - kSafe). While the machine is suspended the boot clock runs on and the
// monotonic one does not: `boot_timer` says the wait is a timer on the boot clock, as the
// watchdog's is; otherwise it is counted on the monotonic clock, as a ppoll timeout is.
Acts replay(StopPlan plan, const std::vector<Clock::time_point>& deadlines,
            std::optional<Suspend> suspend, bool boot_timer, Clock::time_point until) {
  Acts acts;
  Clock::time_point now = kStart;
  std::size_t published = 0;
  while (now < until) {
    while (published < deadlines.size() && deadlines[published] - kSafe <= now)
      plan.lease(deadlines[published++]);
    if (plan.stop_due(now)) {
      plan.stopping(now);
      acts.stopped = now;
    }
    if (plan.kill_due(now)) {
      plan.killing();
      acts.killed = now;
    }
    Clock::time_point wake = plan.next().value_or(until);
    if (published < deadlines.size()) wake = std::min(wake, deadlines[published] - kSafe);
    wake = std::max(wake, now + 1ms);
    if (suspend && now <= suspend->from && suspend->from < wake) {
      // A timer on the boot clock fires at the resume if its instant passed meanwhile; a wait
      // counted on the monotonic clock still has all it had left when the machine went to sleep.
      Clock::time_point resume = suspend->from + suspend->length;
      wake = boot_timer ? std::max(wake, resume) : wake + suspend->length;
      suspend.reset();
    }
    now = wake;
  }
  return acts;
}

// A renewal every 3s from the start until `last` (boot clock), none after.
std::vector<Clock::time_point> renewed_until(Clock::duration last) {
  std::vector<Clock::time_point> deadlines;
  for (auto sent = 0s; sent <= last; sent += 3s) deadlines.push_back(kStart + sent + kSafe);
  return deadlines;
}

}  // namespace

TEST_CASE("without a lease nothing is due until the stop begins; then the kill, a grace later") {
  StopPlan plan(5s);
  CHECK_FALSE(plan.stop_due(kStart + 100h));
  CHECK_FALSE(plan.kill_due(kStart + 100h));
  CHECK(plan.next() == std::nullopt);
  plan.stopping(kStart);
  CHECK(plan.stop_begun());
  CHECK_FALSE(plan.kill_due(kStart + 5s - 1ns));
  CHECK(plan.kill_due(kStart + 5s));
  CHECK(plan.next() == kStart + 5s);
  plan.killing();
  CHECK_FALSE(plan.kill_due(kStart + 6s));
  CHECK(plan.next() == std::nullopt);
}

TEST_CASE(
    "with a lease the watchdog stops the tree after lock's turn and kills it by the deadline") {
  StopPlan plan(1s);
  auto dead_by = kStart + 9s;
  plan.lease(dead_by);
  // lock itself begins at dead_by - kill_after; the watchdog a tenth of -kill-after later.
  CHECK(plan.stop_at() == dead_by - 1s + 100ms);
  CHECK_FALSE(plan.stop_due(dead_by - 1s + 99ms));
  CHECK(plan.stop_due(dead_by - 1s + 100ms));
  CHECK(plan.next() == dead_by - 900ms);
  plan.stopping(dead_by - 900ms);
  CHECK(plan.next() == dead_by);  // not a whole grace after the stop: the deadline comes first
  CHECK_FALSE(plan.kill_due(dead_by - 1ns));
  CHECK(plan.kill_due(dead_by));
}

TEST_CASE("lock's turn is at most 100ms") {
  StopPlan plan(5s);
  plan.lease(kStart + 9s);
  CHECK(plan.stop_at() == kStart + 9s - 5s + 100ms);
}

TEST_CASE("a renewal moves the deadline; one read out of order does not move it back") {
  StopPlan plan(1s);
  plan.lease(kStart + 9s);
  plan.lease(kStart + 12s);
  plan.lease(kStart + 10s);
  CHECK(plan.dead_by() == kStart + 12s);
  CHECK_FALSE(plan.stop_due(kStart + 9s));
  CHECK(plan.kill_due(kStart + 12s));
}

TEST_CASE("a stop lock asked for kills a grace later, or at the deadline if that comes first") {
  StopPlan plan(5s);
  plan.lease(kStart + 9s);
  plan.stopping(kStart + 1s);
  CHECK_FALSE(plan.stop_due(kStart + 8s));  // begun already: not again
  CHECK(plan.next() == kStart + 6s);
  StopPlan late(5s);
  late.lease(kStart + 9s);
  late.stopping(kStart + 7s);
  CHECK(late.next() == kStart + 9s);
}

TEST_CASE("renewed in time, the tree is never stopped") {
  Acts acts = replay(StopPlan(1s), renewed_until(120s), std::nullopt, true, kStart + 100s);
  CHECK(acts.stopped == std::nullopt);
  CHECK(acts.killed == std::nullopt);
}

TEST_CASE("a lock that stops renewing: the tree is stopped, then dead by the deadline") {
  // The last renewal was sent 30s in (lock was stopped then): its deadline is 39s in.
  Acts acts = replay(StopPlan(1s), renewed_until(30s), std::nullopt, true, kStart + 60s);
  REQUIRE(acts.stopped);
  REQUIRE(acts.killed);
  CHECK(*acts.stopped == kStart + 39s - 900ms);
  CHECK(*acts.killed == kStart + 39s);
}

TEST_CASE("after a suspend past the deadline the tree is stopped and killed at once on resume") {
  // The machine sleeps 60s from 20s in; the last renewal, sent 18s in, is good until 27s in.
  Suspend sleep{kStart + 20s, 60s};
  Acts acts = replay(StopPlan(1s), renewed_until(20s), sleep, /*boot_timer=*/true, kStart + 200s);
  REQUIRE(acts.stopped);
  REQUIRE(acts.killed);
  CHECK(*acts.stopped == kStart + 80s);  // the instant it resumes
  CHECK(*acts.killed == kStart + 80s);

  // The same wait counted on the monotonic clock ends as long after the resume as it had left
  // to go before the suspend: the child runs on, its lease long given away.
  Acts late = replay(StopPlan(1s), renewed_until(20s), sleep, /*boot_timer=*/false, kStart + 200s);
  REQUIRE(late.killed);
  CHECK(*late.killed == kStart + 86s + 100ms);  // 59s late, and with no grace
}

TEST_CASE("a suspend shorter than what is left of the lease changes nothing") {
  Suspend nap{kStart + 20s, 5s};
  Acts acts = replay(StopPlan(1s), renewed_until(120s), nap, true, kStart + 100s);
  CHECK(acts.stopped == std::nullopt);
}
