#include <doctest/doctest.h>
#include <unistd.h>

#include "backend/lease/follow_prefix.hpp"
#include "util/event_fd.hpp"

using namespace std::chrono_literals;
using lk::Clock;
using lk::Deadline;
using lk::Look;

namespace {

// A budget of 0.9 × 1 s − 0.5 s = 0.4 s; retries at most 100 ms apart.
const lk::LeaseTiming kTiming{.ttl = 1s, .renew_every = 300ms, .retry_every = 100ms, .stop_grace = 500ms};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lk::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("-status -watch: a server that never answers ends the watch once the budget is spent") {
  int looks = 0;
  auto started = Clock::now();
  std::string error = error_of([&] {
    lk::follow_prefix("p", Deadline::never(), lk::Interrupt{}, kTiming, [&](const lk::Wake&) -> Look {
      ++looks;
      throw lk::NetworkError("etcd at http://a: cannot reach it");
    });
  });
  auto took = Clock::now() - started;
  CHECK(error.starts_with("stopped watching prefix 'p': no answer for "));
  CHECK(error.ends_with(", as long as a hold keeps its lease without one (-session-ttl, -kill-after): "
                        "etcd at http://a: cannot reach it"));
  CHECK(took >= 400ms);
  CHECK(took < 2s);
  CHECK(looks >= 3);  // retried, with backoff: not once, not in a spin
  CHECK(looks < 40);
}

TEST_CASE("-status -watch: an answer starts the budget again, and the deadline ends the watch") {
  int looks = 0;
  // Fails for 0.2 s at a time, within the budget of 0.4 s, then answers: never given up.
  auto failing_since = Clock::now();
  lk::follow_prefix("p", Deadline::after(1500ms), lk::Interrupt{}, kTiming, [&](const lk::Wake&) {
    ++looks;
    if (Clock::now() - failing_since < 200ms) throw lk::NetworkError("no answer");
    failing_since = Clock::now();
    return Look::changed;
  });
  CHECK(looks > 4);
}

TEST_CASE("-status -watch: a look that waited long on a live server, then failed, gets the whole budget") {
  int looks = 0;
  // The first look waits 0.6 s (a quiet watch), longer than the budget, and then fails; the
  // next fails too, then the server is back.
  lk::follow_prefix("p", Deadline::after(1500ms), lk::Interrupt{}, kTiming, [&](const lk::Wake&) {
    if (++looks == 1) usleep(600'000);
    if (looks <= 2) throw lk::NetworkError("connection reset");
    return Look::changed;
  });
  CHECK(looks > 3);
}

TEST_CASE("-status -watch: looks that end quietly at once are paced, and an interrupt ends the watch") {
  lk::EventFd stop;
  int looks = 0;
  lk::Interrupt interrupt{.fd = stop.fd(), .keep_going = [] { return false; }};
  lk::follow_prefix("p", Deadline::never(), interrupt, kTiming, [&](const lk::Wake&) {
    if (++looks == 8) stop.notify();
    return Look::quiet;
  });
  CHECK(looks == 8);
  // Errors other than the network's are not retried.
  CHECK(error_of([&] {
          lk::follow_prefix("p", Deadline::never(), lk::Interrupt{}, kTiming,
                            [&](const lk::Wake&) -> Look { throw lk::Error("permission denied"); });
        }) == "permission denied");
}
