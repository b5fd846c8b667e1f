#include <doctest/doctest.h>

#include <optional>
#include <utility>

#include "backend/lease/lease_budget.hpp"
#include "util/error.hpp"

using namespace std::chrono_literals;
using lk::Clock;
using lk::LeaseTiming;
using lk::RenewalSchedule;
using Phase = lk::LeaseTiming::Phase;

namespace {

const Clock::time_point kGrant = Clock::time_point{} + 1h;

// A window in which the server does not renew: its answers fail at once (5xx, resets), or, when
// `paused`, requests wait and are answered when it ends, as a stopped server's are.
struct Outage {
  Clock::duration from, length;
  bool paused = false;
};

// Replays the keeper's loop on a virtual clock, with a 2 ms round trip, until `until` after the
// grant. Returns when the stop would have begun, or nullopt if the hold survived.
std::optional<Clock::duration> replay(const LeaseTiming& t, Outage o, Clock::duration until,
                                      Phase phase = Phase::holding) {
  constexpr auto rtt = 2ms;
  RenewalSchedule s(t, kGrant, phase);
  Clock::time_point now = kGrant, down = kGrant + o.from, up = down + o.length;
  for (;;) {
    now = std::max(now, std::min(s.next_attempt(), s.stop_at()));
    if (now >= s.stop_at()) return now - kGrant;
    if (now >= kGrant + until) return std::nullopt;
    auto answered_by = now + s.attempt_timeout(now);
    if (now < down || now >= up) {
      s.succeeded(now);
      now += rtt;
    } else if (o.paused && up + rtt <= answered_by) {
      s.succeeded(now);  // sent during the pause, answered after it: the send time counts
      now = up + rtt;
    } else {
      auto failed_at = o.paused ? answered_by : now + rtt;
      s.failed(now, failed_at, std::nullopt);
      now = failed_at;
    }
  }
}

void check_rides_out(const LeaseTiming& t, Clock::duration outage, Phase phase = Phase::holding) {
  for (auto from = 0ms; from < t.ttl; from += 10ms)
    for (bool paused : {false, true}) {
      CAPTURE(from.count());
      CAPTURE(paused);
      CHECK(replay(t, {from, outage, paused}, from + outage + t.ttl, phase) == std::nullopt);
    }
}

}  // namespace

TEST_CASE("the default budgets renew at TTL/3 or sooner and retry 1s apart") {
  LeaseTiming consul = LeaseTiming::plan(15s, 5s, 3);
  CHECK(consul.margin() == 1500ms);
  CHECK(consul.stop_after() == 8500ms);  // 15s - 1.5s margin - 5s grace
  CHECK(consul.renew_every == 5s);
  CHECK(consul.retry_every == 1s);
  LeaseTiming etcd = LeaseTiming::plan(10s, 5s, 3);
  CHECK(etcd.stop_after() == 4s);
  CHECK(etcd.renew_every == 500ms);  // 4s less three retries and half a spacing for the last
  CHECK(etcd.retry_every == 1s);
  CHECK(LeaseTiming::plan(60s, 5s, 3).renew_every == 20s);
}

TEST_CASE("a waiter renews at TTL/2 or sooner, and never more often than a holder") {
  CHECK(LeaseTiming::plan(15s, 5s, 3).renew_after(Phase::waiting) == 7500ms);  // as api.Lock does
  CHECK(LeaseTiming::plan(10s, 5s, 3).renew_after(Phase::waiting) == 5s);
  CHECK(LeaseTiming::plan(60s, 5s, 3).renew_after(Phase::waiting) == 30s);
  // 4.5s less three retries and half a spacing for the last
  CHECK(LeaseTiming::plan(5s, 1s, 3).renew_after(Phase::waiting) == 1s);
  for (auto ttl : {1s, 2s, 3s, 5s, 10s, 15s, 60s}) {
    LeaseTiming t = LeaseTiming::plan(ttl, ttl / 4, 3);
    CAPTURE(ttl.count());
    CHECK(t.renew_after(Phase::waiting) >= t.renew_after(Phase::holding));
    CHECK(t.give_up_after(Phase::waiting) == t.safe());  // no child: no grace to keep
  }
}

// The short-TTL false loss: the stop used to begin before the first renewal was even due.
TEST_CASE("a short TTL with the default grace is renewed before its stop could begin") {
  for (auto ttl : {2s, 3s, 5s, 8s, 10s, 12s}) {
    CAPTURE(ttl.count());
    LeaseTiming t = LeaseTiming::plan(ttl, std::min<std::chrono::nanoseconds>(5s, ttl / 2), 3);
    CHECK(t.renew_every + 3 * t.retry_every < t.stop_after());
    CHECK(replay(t, {0s, 0s}, 10 * t.ttl) == std::nullopt);
  }
}

TEST_CASE("a short budget spaces the retries closer instead of dropping them") {
  LeaseTiming t = LeaseTiming::plan(10s, 7s, 3);  // 2s between a renewal and the stop
  CHECK(t.retry_every == 500ms);
  CHECK(t.renew_every == 250ms);
  CHECK(t.renew_every + 3 * t.retry_every + t.retry_every / 2 <= t.stop_after());
}

TEST_CASE("combinations that cannot keep the promise are refused, naming the flags") {
  CHECK_THROWS_WITH_AS(LeaseTiming::plan(10s, 9s, 3),
                       doctest::Contains("-kill-after 9s does not fit in -session-ttl 10s"),
                       lk::UsageError);
  CHECK_THROWS_WITH_AS(LeaseTiming::plan(2s, 1750ms, 3),
                       doctest::Contains("-session-ttl 2s with -kill-after 1.75s leaves 50ms"),
                       lk::UsageError);
  CHECK_FALSE(LeaseTiming::plan(10s, 4s, 30).shortfall());
}

TEST_CASE("a -monitor-retry that does not fit gets as many retries as do, 100ms apart") {
  LeaseTiming t = LeaseTiming::plan(10s, 3s, 1000);  // 6s between a renewal and the stop
  CHECK(t.retry_every == 100ms);
  CHECK(t.renew_every == 50ms);
  CHECK(t.guaranteed_retries() == 59);
  REQUIRE(t.shortfall());
  CHECK(*t.shortfall() ==
        "-monitor-retry 1000 does not fit in the 6s between a renewal and the "
        "child's stop (-session-ttl 10s less a 10% margin and -kill-after 3s); "
        "59 retries, 100ms apart, do");
}

TEST_CASE("with the defaults, a 2.5s outage at any moment of a hold does not stop the child") {
  check_rides_out(LeaseTiming::plan(15s, 5s, 3), 2500ms);  // Consul
  check_rides_out(LeaseTiming::plan(10s, 5s, 3), 2500ms);  // etcd
  for (auto ttl : {10s, 15s})                              // nor of a wait, renewed less often
    check_rides_out(LeaseTiming::plan(ttl, 5s, 3), 2500ms, Phase::waiting);
  // The replay does see a loss: renewing only at TTL/2, an outage over the renewal stops it.
  LeaseTiming half_ttl{15s, 7500ms, 1s, 5s, 3};
  CHECK(replay(half_ttl, {7400ms, 2500ms}, 30s) == 8500ms);
}

TEST_CASE(
    "after any failure, -monitor-retry more attempts at most 1s apart start before the stop") {
  for (int retries : {0, 1, 3, 5}) {
    for (auto [ttl, phase] : {std::pair{10s, Phase::holding},
                              {15s, Phase::holding},
                              {60s, Phase::holding},
                              {10s, Phase::waiting},
                              {15s, Phase::waiting},
                              {60s, Phase::waiting}}) {
      LeaseTiming t = LeaseTiming::plan(ttl, 5s, retries);
      RenewalSchedule s(t, kGrant, phase);
      auto first = s.next_attempt();
      auto at = first;
      int attempts = 0;
      while (at < s.stop_at()) {
        CHECK(at + s.attempt_timeout(at) <= s.stop_at() + 1ms);  // the timeout is whole ms
        auto answered_by = at + s.attempt_timeout(at);           // a server that never answers
        s.failed(at, answered_by, std::nullopt);
        CHECK(s.next_attempt() - at <= 1s);
        at = s.next_attempt();
        ++attempts;
      }
      CAPTURE(retries);
      CAPTURE(ttl.count());
      CAPTURE(phase == Phase::waiting);
      CHECK(attempts >= retries + 1);
    }
  }
}

TEST_CASE("the lease is never counted lost while the last renewal still covers it") {
  LeaseTiming t = LeaseTiming::plan(15s, 5s, 3);
  RenewalSchedule s(t, kGrant, Phase::holding);
  s.succeeded(kGrant + 5s);
  CHECK(s.stop_at() == kGrant + 13500ms);
  CHECK(s.dead_by() == kGrant + 18500ms);
  s.succeeded(kGrant + 4s);  // a late answer to an older attempt moves nothing back
  CHECK(s.stop_at() == kGrant + 13500ms);
}

TEST_CASE("Retry-After is honoured as far as the budget allows") {
  LeaseTiming t = LeaseTiming::plan(15s, 5s, 3);
  RenewalSchedule s(t, kGrant, Phase::holding);
  auto due = s.next_attempt();  // 5s
  s.failed(due, due, 2s);
  CHECK(s.next_attempt() == due + 2s);
  s.failed(due + 2s, due + 2s, 60s);  // far past the stop: the last attempt must still fit
  CHECK(s.next_attempt() == s.stop_at() - t.retry_every / 2);
}

TEST_CASE("a turn comes with a renewal fit for the holder's budget, never on a waiter's") {
  LeaseTiming t = LeaseTiming::plan(10s, 5s, 3);  // a holder renews every 500ms, a waiter every 5s
  SUBCASE("a renewal recent enough for a holder: the hold begins at once") {
    RenewalSchedule s(t, kGrant, Phase::waiting);
    CHECK(s.stop_at() == kGrant + 9s);  // a waiter gives its place up only as the lease may end
    CHECK(s.hold(kGrant + 400ms));
    CHECK(s.holding());
    CHECK(s.stop_at() == kGrant + 4s);
    CHECK(s.next_attempt() == kGrant + 500ms);
  }
  SUBCASE("an older one: a renewal at once, and only one sent after the turn came counts") {
    RenewalSchedule s(t, kGrant, Phase::waiting);
    s.succeeded(kGrant + 5s);
    CHECK(s.next_attempt() == kGrant + 10s);
    auto turn = kGrant + 8s;  // 3s after the last renewal: a holder's stop would begin in 1s
    CHECK_FALSE(s.hold(turn));
    CHECK_FALSE(s.holding());
    CHECK(s.next_attempt() == turn);
    CHECK(s.stop_at() == kGrant + 14s);  // still the waiter's: the turn lost nothing
    s.succeeded(turn - 100ms);           // an answer to a renewal sent before the turn
    CHECK_FALSE(s.holding());
    CHECK(s.next_attempt() <= turn);
    s.failed(turn, turn + 2ms, std::nullopt);
    CHECK_FALSE(s.holding());
    s.succeeded(turn + 2ms);
    CHECK(s.holding());
    CHECK(s.stop_at() == turn + 2ms + 4s);  // the whole holder's budget from the new renewal
    CHECK(s.next_attempt() == turn + 2ms + 500ms);
  }
  SUBCASE("a waiter whose renewals fail keeps its place until the lease-safe deadline") {
    RenewalSchedule s(t, kGrant, Phase::waiting);
    auto at = s.next_attempt();
    while (at < s.stop_at()) {
      s.failed(at, at + s.attempt_timeout(at), std::nullopt);
      at = s.next_attempt();
    }
    CHECK(s.stop_at() == s.dead_by());
    CHECK_FALSE(s.hold(s.stop_at()));
  }
}
