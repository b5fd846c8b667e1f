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
