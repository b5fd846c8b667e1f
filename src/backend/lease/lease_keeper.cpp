#include "backend/lease/lease_keeper.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include "cli/duration.hpp"
#include "util/log.hpp"

namespace lk {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

nanoseconds LeaseTiming::stop_after() const {
  nanoseconds safe = ttl - margin();
  // A grace period longer than half the lease would start the stop before the first renewal
  // could even fail; past that point the child gets SIGKILL at the deadline instead.
  return safe - std::min(stop_grace, safe / 2);
}

LeaseKeeper::LeaseKeeper(LeaseTiming timing, Clock::time_point granted_at, Renew renew)
    : timing_(timing),
      renew_(std::move(renew)),
      loss_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      last_ack_send_(granted_at) {
  if (!loss_) throw sys_error("eventfd");
  thread_ = std::thread([this] { run(); });
}

LeaseKeeper::~LeaseKeeper() { stop(); }

void LeaseKeeper::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<std::string> LeaseKeeper::reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

Deadline LeaseKeeper::stop_by() const {
  std::lock_guard lock(mutex_);
  return Deadline(last_ack_send_ + timing_.stop_after());
}

Deadline LeaseKeeper::dead_by() const {
  std::lock_guard lock(mutex_);
  return Deadline(last_ack_send_ + timing_.ttl - timing_.margin());
}

void LeaseKeeper::lose(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (reason_) return;
    reason_ = why;
  }
  std::uint64_t one = 1;
  (void)!write(loss_.get(), &one, sizeof one);
  wake_.notify_all();
}

void LeaseKeeper::run() {
  std::unique_lock lock(mutex_);
  int failures = 0;
  std::string last_error;
  Clock::time_point next = last_ack_send_ + timing_.renew_every;
  while (!stopping_ && !reason_) {
    Clock::time_point stop_at = last_ack_send_ + timing_.stop_after();
    wake_.wait_until(lock, std::min(next, stop_at), [&] { return stopping_ || reason_; });
    if (stopping_ || reason_) break;
    auto now = Clock::now();
    if (now >= stop_at) {
      auto left = last_ack_send_ + timing_.ttl - timing_.margin() - now;
      lock.unlock();
      lose(fmt::format("the lease could not be renewed ({}); it may expire {} from now",
                       last_error.empty() ? "no answer in time" : last_error,
                       format_go_duration(std::max(nanoseconds(0), std::chrono::duration_cast<nanoseconds>(left)))));
      lock.lock();
      break;
    }
    if (now < next) continue;
    auto request_timeout = std::chrono::duration_cast<milliseconds>(
        std::max<nanoseconds>(stop_at - now, milliseconds(100)));
    lock.unlock();
    try {
      renew_(request_timeout);
      lock.lock();
      last_ack_send_ = now;
      if (failures) verbose("renewed the lease after {} failed attempt(s)", failures);
      failures = 0;
      next = now + timing_.renew_every;
      verbose("renewed the lease; it cannot expire before {} from now",
              format_go_duration(timing_.ttl - timing_.margin()));
    } catch (const LeaseGone& e) {
      lose(e.what());
      lock.lock();
    } catch (const std::exception& e) {  // a garbled answer is as good as none: retry
      lock.lock();
      last_error = e.what();
      if (++failures > timing_.monitor_retry) {
        lock.unlock();
        lose(fmt::format("renewing the lease failed {} times: {}", failures, last_error));
        lock.lock();
        break;
      }
      verbose("renewing the lease failed ({}); retrying in 1s", last_error);
      next = Clock::now() + std::chrono::seconds(1);
    }
  }
}

}  // namespace lk
