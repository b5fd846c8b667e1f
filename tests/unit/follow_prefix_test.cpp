#include <doctest/doctest.h>
#include <unistd.h>

#include "backend/lease/follow_prefix.hpp"
#include "util/event_fd.hpp"

using namespace std::chrono_literals;
using lk::Clock;
using lk::Deadline;
using lk::Look;

namespace {

// A budget of 0.9 × 1 s − 0.5 s = 0.4 s; probes 300 ms into a silence, retried at most 100 ms
// apart.
const lk::LeaseTiming kTiming{
    .ttl = 1s, .renew_every = 300ms, .retry_every = 100ms, .stop_grace = 500ms};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const lk::Error& e) {
    return e.what();
  }
  return "";
}

// A look's wait on a server that says nothing: on the wake's descriptors, as the backends wait.
void wait_quietly(const lk::Wake& wake, std::chrono::milliseconds how_long) {
  if (!lk::pause_unless_woken(how_long, &wake)) throw lk::Cancelled("stopped");
}

struct Probes {
  int asked = 0;
  bool answer = true;
  lk::Probe probe() {
    return [this](std::chrono::milliseconds timeout, const lk::Wake&) {
      ++asked;
      CHECK(timeout <= 400ms);  // never past the budget
      if (!answer) throw lk::NetworkError("etcd at http://a: range: no answer");
    };
  }
};

}  // namespace

TEST_CASE("-status -watch: a server that never answers ends the watch once the budget is spent") {
  int looks = 0;
  Probes probes{.answer = false};
  auto started = Clock::now();
  std::string error = error_of([&] {
    lk::follow_prefix("p", Deadline::never(), lk::Interrupt{}, kTiming, probes.probe(),
                      [&](const lk::Wake&, const lk::Heard&) -> Look {
                        ++looks;
                        throw lk::NetworkError("etcd at http://a: cannot reach it");
                      });
  });
  auto took = Clock::now() - started;
  CHECK(error.starts_with("stopped watching prefix 'p': no answer for "));
  CHECK(error.find(", as long as a hold keeps its lease without one (-session-ttl, -kill-after): "
                   "etcd at http://a: ") != std::string::npos);
  CHECK(took >= 400ms);
  CHECK(took < 2s);
  CHECK(looks >= 3);  // retried, with backoff: not once, not in a spin
  CHECK(looks < 40);
}

TEST_CASE("-status -watch: an answer starts the budget again, and the deadline ends the watch") {
  int looks = 0;
  Probes probes{.answer = false};
  // Fails for 0.2 s at a time, within the budget of 0.4 s, then answers: never given up.
  auto failing_since = Clock::now();
  lk::follow_prefix("p", Deadline::after(1500ms), lk::Interrupt{}, kTiming, probes.probe(),
                    [&](const lk::Wake&, const lk::Heard& heard) {
                      ++looks;
                      if (Clock::now() - failing_since < 200ms) throw lk::NetworkError("no answer");
                      heard();
                      failing_since = Clock::now();
                      return Look::changed;
                    });
  CHECK(looks > 4);
}

TEST_CASE(
    "-status -watch: a quiet look on a live server goes on, proved alive by probes at the renewal "
    "pace") {
  int looks = 0;
  Probes probes;
  // The first look waits 1 s with nothing to say, longer than the budget, and then fails; the
  // next fails too, then the server is back.
  lk::follow_prefix("p", Deadline::after(1500ms), lk::Interrupt{}, kTiming, probes.probe(),
                    [&](const lk::Wake& wake, const lk::Heard& heard) {
                      if (++looks == 1) wait_quietly(wake, 1000ms);
                      if (looks <= 3) throw lk::NetworkError("connection reset");
                      heard();
                      return Look::changed;
                    });
  CHECK(looks > 4);
  CHECK(probes.asked >= 2);  // 300 ms into the silence, and each 300 ms after an answer
  CHECK(probes.asked <= 5);
}

TEST_CASE("-status -watch: a look that keeps hearing from its server costs no probe") {
  Probes probes;
  lk::follow_prefix("p", Deadline::after(1000ms), lk::Interrupt{}, kTiming, probes.probe(),
                    [&](const lk::Wake& wake, const lk::Heard& heard) {
                      for (;;) {
                        wait_quietly(wake, 50ms);
                        heard();
                      }
                      return Look::changed;
                    });
  CHECK(probes.asked == 0);
}

TEST_CASE(
    "-status -watch: a quiet look on a silent server ends once the budget passed since it was last "
    "heard") {
  Probes probes;
  auto started = Clock::now();
  std::optional<Clock::time_point> last_heard;
  std::string error = error_of([&] {
    lk::follow_prefix("p", Deadline::never(), lk::Interrupt{}, kTiming, probes.probe(),
                      [&](const lk::Wake& wake, const lk::Heard& heard) -> Look {
                        wait_quietly(wake, 100ms);
                        heard();  // the first read, 100 ms in; then silence
                        last_heard = Clock::now();
                        probes.answer = false;
                        wait_quietly(wake, 10s);
                        return Look::changed;
                      });
  });
  auto took = Clock::now() - *last_heard;
  const std::string said = "stopped watching prefix 'p': no answer for ";
  REQUIRE(error.starts_with(said));
  CHECK(std::stoi(error.substr(said.size())) >= 400);  // counted from the last answer
  CHECK(error.ends_with(": etcd at http://a: range: no answer"));
  CHECK(took >= 400ms);
  CHECK(took < 1s);
  CHECK(probes.asked >= 2);  // 300 ms after the last answer, then retried until the budget ends
  CHECK(Clock::now() - started < 2s);
}

TEST_CASE(
    "-status -watch: looks that end quietly at once are paced, and an interrupt ends the watch") {
  lk::EventFd stop;
  int looks = 0;
  Probes probes;
  lk::Interrupt interrupt{.fd = stop.fd(), .keep_going = [] { return false; }};
  lk::follow_prefix("p", Deadline::never(), interrupt, kTiming, probes.probe(),
                    [&](const lk::Wake&, const lk::Heard& heard) {
                      heard();
                      if (++looks == 8) stop.notify();
                      return Look::quiet;
                    });
  CHECK(looks == 8);
  // Errors other than the network's are not retried.
  CHECK(error_of([&] {
          lk::follow_prefix("p", Deadline::never(), lk::Interrupt{}, kTiming, probes.probe(),
                            [&](const lk::Wake&, const lk::Heard&) -> Look {
                              throw lk::Error("permission denied");
                            });
        }) == "permission denied");
}
