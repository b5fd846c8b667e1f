#include <doctest/doctest.h>
#include <poll.h>

#include <atomic>
#include <future>

#include "backend/errors.hpp"
#include "backend/lease/lease_keeper.hpp"

using namespace std::chrono_literals;
using lk::Clock;
using lk::LeaseKeeper;
using lk::LeaseTiming;

TEST_CASE("stopping the keeper cuts a renewal in flight short") {
  // A renewal the server leaves unanswered: it waits up to 10 s, unless its stop comes first.
  std::promise<void> in_flight;
  std::atomic<int> calls = 0;
  std::atomic<bool> going_on_before = false, cut_short = false;
  LeaseTiming timing{.ttl = 60s, .renew_every = 1ms, .retry_every = 100ms, .stop_grace = 1s};
  LeaseKeeper keeper(timing, Clock::now(), [&](std::chrono::milliseconds, const lk::Wake& stop) {
    if (calls++ > 0) return;
    going_on_before = stop.keep_going();
    in_flight.set_value();
    pollfd p{stop.fds.at(0), POLLIN, 0};
    if (poll(&p, 1, 10'000) == 1 && !stop.keep_going()) {
      cut_short = true;
      throw lk::Cancelled("cut short");
    }
  });
  in_flight.get_future().wait();
  keeper.stop();
  CHECK(going_on_before);
  CHECK(cut_short);
  CHECK(calls == 1);
  CHECK_FALSE(keeper.reason());  // stopping is no loss
}

TEST_CASE("a turn on an old renewal waits for a new one before the lease is kept for a holder") {
  // A waiter renews every 10s here, a holder every 200ms: the grant is already too old at the turn.
  LeaseTiming timing{.ttl = 60s,
                     .renew_every = 200ms,
                     .retry_every = 1s,
                     .stop_grace = 1s,
                     .wait_renew_every = 10s};
  std::atomic<int> calls = 0;
  std::promise<Clock::time_point> renewed;
  auto granted = Clock::now() - 300ms;
  LeaseKeeper keeper(timing, granted, [&](std::chrono::milliseconds, const lk::Wake&) {
    if (calls++ == 0) renewed.set_value(Clock::now());
  });
  CHECK_THROWS_AS(keeper.publish_deadline([](Clock::time_point) {}), std::logic_error);
  auto turn = Clock::now();
  CHECK_FALSE(keeper.start_holding());
  pollfd p{keeper.held_fd(), POLLIN, 0};
  REQUIRE(poll(&p, 1, 5'000) == 1);
  CHECK(renewed.get_future().get() >= turn);
  Clock::time_point published{};
  keeper.publish_deadline([&](Clock::time_point dead_by) { published = dead_by; });
  CHECK(published >= turn + timing.safe());
  CHECK(keeper.start_holding());
  keeper.stop();
}

TEST_CASE("a turn on a recent renewal is kept for a holder at once, then renewed at its pace") {
  LeaseTiming timing{.ttl = 60s,
                     .renew_every = 300ms,
                     .retry_every = 1s,
                     .stop_grace = 1s,
                     .wait_renew_every = 30s};
  std::atomic<int> calls = 0;
  std::promise<Clock::time_point> renewed;
  LeaseKeeper keeper(timing, Clock::now(), [&](std::chrono::milliseconds, const lk::Wake&) {
    if (calls++ == 0) renewed.set_value(Clock::now());
  });
  auto turn = Clock::now();
  CHECK(keeper.start_holding());
  CHECK(calls == 0);  // no request at the turn
  // The keeper was waiting for the waiter's 30 s; the holder's renewal comes 300 ms in.
  auto future = renewed.get_future();
  REQUIRE(future.wait_for(5s) == std::future_status::ready);
  CHECK(future.get() - turn < 5s);
  keeper.stop();
}

TEST_CASE("an answered request on the lease's own session counts as a renewal") {
  LeaseTiming timing{.ttl = 60s,
                     .renew_every = 200ms,
                     .retry_every = 1s,
                     .stop_grace = 1s,
                     .wait_renew_every = 30s};
  std::atomic<int> calls = 0;
  LeaseKeeper keeper(timing, Clock::now() - 10s,
                     [&](std::chrono::milliseconds, const lk::Wake&) { ++calls; });
  auto sent = Clock::now();
  keeper.confirmed(sent);
  CHECK(keeper.start_holding());  // the look that found our turn will do
  Clock::time_point published{};
  keeper.publish_deadline([&](Clock::time_point dead_by) { published = dead_by; });
  CHECK(published == sent + timing.safe());
  keeper.stop();
  CHECK(calls == 0);
}
