#include "backend/lease/lease_keeper.hpp"

#include <unistd.h>

#include <stdexcept>

#include "backend/errors.hpp"
#include "net/wake.hpp"
#include "util/duration.hpp"
#include "util/log.hpp"

namespace lk {

using std::chrono::nanoseconds;

namespace {

// A measured time, for a person: to the millisecond ("4.001s", "999ms"), not the nanosecond.
std::string go(Clock::duration d) {
  auto ms = std::chrono::round<std::chrono::milliseconds>(d);
  return format_go_duration(std::max(nanoseconds(0), std::chrono::duration_cast<nanoseconds>(ms)));
}

}  // namespace

LeaseKeeper::LeaseKeeper(LeaseTiming timing, Clock::time_point granted_at, Renew renew,
                         bool await_answers)
    : renew_(std::move(renew)),
      await_answers_(await_answers),
      schedule_(timing, granted_at, LeaseTiming::Phase::waiting) {
  verbose("{}", timing.describe());
  thread_ = std::thread([this] { run(); });
}

LeaseKeeper::~LeaseKeeper() { stop(); }

void LeaseKeeper::stop_soon() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_.notify();
  wake_.notify_all();
}

bool LeaseKeeper::stopping() const {
  std::lock_guard lock(mutex_);
  return stopping_;
}

void LeaseKeeper::stop() {
  stop_soon();
  if (thread_.joinable()) thread_.join();
}

std::optional<std::string> LeaseKeeper::reason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

bool LeaseKeeper::may_be_gone() const {
  std::lock_guard lock(mutex_);
  return reason_ || Clock::now() >= schedule_.dead_by();
}

void LeaseKeeper::confirmed(Clock::time_point sent_at) {
  std::lock_guard lock(mutex_);
  succeeded(sent_at);
  ++reschedules_;
  wake_.notify_all();
}

void LeaseKeeper::succeeded(Clock::time_point sent_at) {
  bool was_holding = schedule_.holding();
  schedule_.succeeded(sent_at);
  if (!was_holding && schedule_.holding()) held_.notify();
  if (publish_) publish_(schedule_.dead_by());
}

bool LeaseKeeper::start_holding() {
  std::lock_guard lock(mutex_);
  ++reschedules_;  // the next renewal is due sooner now, either way
  wake_.notify_all();
  if (schedule_.hold(Clock::now())) return true;
  verbose("renewing the lease before the child starts: the last renewal was {} ago",
          go(Clock::now() - schedule_.last_ack_send()));
  return false;
}

void LeaseKeeper::publish_deadline(std::function<void(Clock::time_point)> publish) {
  std::lock_guard lock(mutex_);
  if (!schedule_.holding())
    throw std::logic_error("a lease not yet kept for a holder has no deadline to publish");
  publish_ = std::move(publish);
  publish_(schedule_.dead_by());
}

void LeaseKeeper::lose(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (reason_) return;
    reason_ = why;
  }
  loss_.notify();
  wake_.notify_all();
}

void LeaseKeeper::run() {
  std::unique_lock lock(mutex_);
  std::string last_error;
  while (!stopping_ && !reason_) {
    int seen = reschedules_;
    wake_.wait_until(lock, std::min(schedule_.next_attempt(), schedule_.stop_at()),
                     [&] { return stopping_ || reason_ || reschedules_ != seen; });
    if (stopping_ || reason_) break;
    auto now = Clock::now();
    if (now >= schedule_.stop_at()) {
      auto why = fmt::format(
          "the lease could not be renewed for {} ({} attempt(s) failed, the last with: {}); it "
          "may expire {} from now",
          go(now - schedule_.last_ack_send()), schedule_.failures(),
          last_error.empty() ? "no answer in time" : last_error, go(schedule_.dead_by() - now));
      lock.unlock();
      lose(why);
      return;
    }
    if (now < schedule_.next_attempt()) continue;
    auto timeout =
        await_answers_
            ? std::max(std::chrono::milliseconds(1),
                       std::chrono::ceil<std::chrono::milliseconds>(schedule_.stop_at() - now))
            : schedule_.attempt_timeout(now);
    lock.unlock();
    std::optional<std::chrono::seconds> retry_after;
    std::string error;
    try {
      renew_(timeout, stop_wake_);
    } catch (const Cancelled&) {
      return;  // renewals are over: nobody waits for this one's answer
    } catch (const LeaseGone& e) {
      lose(e.what());
      return;
    } catch (const ServerUnavailable& e) {
      error = e.what();
      retry_after = e.retry_after;
    } catch (const std::exception& e) {  // a garbled answer is as good as none: retry
      error = e.what();
    }
    lock.lock();
    if (error.empty()) {
      if (schedule_.failures())
        verbose("renewed the lease after {} failed attempt(s)", schedule_.failures());
      succeeded(now);
      continue;
    }
    last_error = error;
    schedule_.failed(now, Clock::now(), retry_after);
    verbose(
        "renewing the lease failed ({}); retrying in {}; the stop begins in {} without a renewal",
        error, go(schedule_.next_attempt() - Clock::now()), go(schedule_.stop_at() - Clock::now()));
  }
}

}  // namespace lk
