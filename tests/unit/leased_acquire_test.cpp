#include "backend/lease/leased_acquire.hpp"

#include <doctest/doctest.h>

#include <thread>

#include "util/event_fd.hpp"

using namespace std::chrono_literals;
using lk::Clock;
using lk::Deadline;
using lk::LeaseWait;

namespace {

struct Calls {
  int contentions = 0, locks = 0, semaphores = 0, holds = 0, leaves = 0, queued = 0;
};

class FakeHold : public lk::Hold {
 public:
  int loss_fd() const override { return -1; }
  std::optional<std::string> check_loss() override { return std::nullopt; }
  lk::EnvVars child_env() const override { return {}; }
  std::vector<int> child_fds() const override { return {}; }
  void hold_until(const std::string&) override {}
  void release() override {}
};

// What a contention does while it waits for its turn, and whether its hold() finds the wait over.
using Turn = std::function<bool(LeaseWait&)>;
using MakeHold = std::function<std::unique_ptr<lk::Hold>(LeaseWait&)>;

class FakeContention : public lk::Contention {
 public:
  FakeContention(LeaseWait& wait, Calls& calls, Turn turn, MakeHold hold)
      : wait_(wait), calls_(calls), turn_(std::move(turn)), hold_(std::move(hold)) {}
  bool lock(const lk::Queued& queued) override {
    ++calls_.locks;
    queued();
    return turn_(wait_);
  }
  bool semaphore(const lk::Queued& queued) override {
    ++calls_.semaphores;
    queued();
    return turn_(wait_);
  }
  std::unique_ptr<lk::Hold> hold() override {
    ++calls_.holds;
    return hold_(wait_);
  }
  void leave() override { ++calls_.leaves; }

 private:
  LeaseWait& wait_;
  Calls& calls_;
  Turn turn_;
  MakeHold hold_;
};

// A request that the server leaves unanswered, cut short (Cancelled) when `wake` says stop.
[[noreturn]] void unanswered(const lk::Wake& wake) {
  if (!lk::pause_unless_woken(10s, &wake)) throw lk::Cancelled("cut short");
  throw std::logic_error("the wait was not cut short");
}

// A turn spent on a request that the server leaves unanswered.
[[noreturn]] bool wait_unanswered(LeaseWait& wait) { unanswered(wait.wake()); }

struct Acquisition {
  int limit = 1;
  Deadline deadline = Deadline::never();
  lk::Interrupt interrupt{};
  bool deadline_ends_requests = false;
  // The lease: renewed at once, unless a test says otherwise.
  lk::LeaseTiming timing{
      .ttl = 60s, .renew_every = 20s, .retry_every = 1s, .stop_grace = 1s, .wait_renew_every = 20s};
  Clock::time_point granted_at = Clock::now();
  lk::LeaseKeeper::Renew renew = [](std::chrono::milliseconds, const lk::Wake&) {};
  std::function<void(const lk::Wake&)> connect = [](const lk::Wake&) {};
  Turn turn = [](LeaseWait&) { return true; };
  MakeHold hold = [](LeaseWait&) { return std::make_unique<FakeHold>(); };

  Calls calls{};
  std::unique_ptr<lk::LeaseKeeper> keeper{};

  std::unique_ptr<lk::Hold> run() {
    lk::LockSpec spec{"p", limit, "test"};
    auto open_lease = [&](const lk::Wake& wake) -> lk::LeaseKeeper& {
      connect(wake);
      keeper = std::make_unique<lk::LeaseKeeper>(timing, granted_at, renew);
      return *keeper;
    };
    auto contend = [&](LeaseWait& wait) {
      ++calls.contentions;
      return std::make_unique<FakeContention>(wait, calls, turn, hold);
    };
    return lk::leased_acquire(spec, deadline, interrupt, [&] { ++calls.queued; },
                              {.open_lease = open_lease,
                               .contend = contend,
                               .deadline_ends_requests = deadline_ends_requests});
  }
};

// An interrupt whose descriptor is readable already, and which says stop: a stop signal.
struct StopSignal {
  lk::EventFd fd;
  StopSignal() { fd.notify(); }
  lk::Interrupt interrupt() const {
    return {.fd = fd.fd(), .keep_going = [] { return false; }};
  }
};

}  // namespace

TEST_CASE("the contention's lock runs for one slot, its semaphore for more; its hold is returned") {
  Acquisition lock;
  CHECK(lock.run() != nullptr);
  CHECK(lock.calls.locks == 1);
  CHECK(lock.calls.semaphores == 0);
  CHECK(lock.calls.holds == 1);
  CHECK(lock.calls.leaves == 0);
  CHECK(lock.calls.queued == 1);

  Acquisition semaphore{.limit = 3};
  CHECK(semaphore.run() != nullptr);
  CHECK(semaphore.calls.locks == 0);
  CHECK(semaphore.calls.semaphores == 1);
  CHECK(semaphore.calls.holds == 1);
}

TEST_CASE("a request cut short by the deadline is the timeout, after leaving the line") {
  Acquisition a{.deadline = Deadline::after(100ms)};
  a.turn = wait_unanswered;
  CHECK_THROWS_WITH_AS(a.run(), "timed out waiting for prefix 'p'", lk::AcquireTimeout);
  CHECK(a.calls.leaves == 1);
  CHECK(a.calls.holds == 0);
}

TEST_CASE("a stop signal while waiting is an interruption, after leaving the line") {
  StopSignal stop;
  Acquisition a{.interrupt = stop.interrupt()};
  a.turn = wait_unanswered;
  CHECK_THROWS_WITH_AS(a.run(), "interrupted while waiting for the lock", lk::Interrupted);
  CHECK(a.calls.leaves == 1);
}

TEST_CASE("a wait that the lease's loss ends says what the keeper said") {
  Acquisition a;
  a.turn = [&](LeaseWait& wait) {
    a.keeper->lose("our key was deleted");
    return wait.keep_going();
  };
  CHECK_THROWS_WITH_AS(a.run(), "lost our place in line: our key was deleted", lk::Error);
  CHECK(a.calls.leaves == 1);
  CHECK(a.calls.holds == 0);
}

TEST_CASE("a stop signal while connecting is an interruption, before any contention") {
  StopSignal stop;
  Acquisition a{.interrupt = stop.interrupt()};
  a.connect = unanswered;
  CHECK_THROWS_WITH_AS(a.run(), "interrupted while waiting for the lock", lk::Interrupted);
  CHECK(a.calls.contentions == 0);
}

TEST_CASE("a network error past the deadline is a timeout only where the deadline ends requests") {
  auto fail_late = [](Acquisition& a) {
    a.deadline = Deadline::after(50ms);
    a.turn = [](LeaseWait&) -> bool {
      std::this_thread::sleep_for(100ms);
      throw lk::NetworkError("etcd at http://a: range: no answer");
    };
  };
  Acquisition etcd{.deadline_ends_requests = true};
  fail_late(etcd);
  CHECK_THROWS_WITH_AS(etcd.run(), "timed out waiting for prefix 'p'", lk::AcquireTimeout);
  Acquisition consul;
  fail_late(consul);
  CHECK_THROWS_WITH_AS(consul.run(), "etcd at http://a: range: no answer", lk::NetworkError);
  // A fault is no end of the wait: the lease's end takes our place in line with it.
  CHECK(etcd.calls.leaves == 0);
  CHECK(consul.calls.leaves == 0);
}

TEST_CASE("a network error before the deadline is the server's") {
  Acquisition a{.deadline = Deadline::after(10s), .deadline_ends_requests = true};
  a.turn = [](LeaseWait&) -> bool { throw lk::NetworkError("etcd at http://a: range: no answer"); };
  CHECK_THROWS_WITH_AS(a.run(), "etcd at http://a: range: no answer", lk::NetworkError);
}

TEST_CASE("an error that ends the acquisition for good passes through, without leaving the line") {
  Acquisition a;
  a.turn = [](LeaseWait&) -> bool { throw lk::not_lock_use(); };
  CHECK_THROWS_WITH_AS(a.run(), "Existing key does not match lock use", lk::Error);
  CHECK(a.calls.leaves == 0);
}

TEST_CASE("a turn whose lease cannot be renewed for a holder before the deadline is no hold") {
  // A holder renews every 200 ms: a grant 300 ms old is too old to start the child on, and the
  // renewal owed at the turn never gets an answer.
  Acquisition a{.deadline = Deadline::after(300ms),
                .timing = {.ttl = 60s,
                           .renew_every = 200ms,
                           .retry_every = 1s,
                           .stop_grace = 1s,
                           .wait_renew_every = 10s},
                .granted_at = Clock::now() - 300ms};
  a.renew = [](std::chrono::milliseconds, const lk::Wake& stop) { unanswered(stop); };
  CHECK_THROWS_WITH_AS(a.run(), "timed out waiting for prefix 'p'", lk::AcquireTimeout);
  CHECK(a.calls.holds == 0);
  CHECK(a.calls.leaves == 1);
}

TEST_CASE("a hold that finds the wait over is no hold") {
  Acquisition a{.deadline = Deadline::after(50ms)};
  a.hold = [](LeaseWait& wait) -> std::unique_ptr<lk::Hold> {
    std::this_thread::sleep_for(100ms);
    CHECK_FALSE(wait.keep_going());
    return nullptr;
  };
  CHECK_THROWS_WITH_AS(a.run(), "timed out waiting for prefix 'p'", lk::AcquireTimeout);
  CHECK(a.calls.leaves == 1);
}
