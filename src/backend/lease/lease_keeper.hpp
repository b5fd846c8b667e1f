#pragma once
// Keeps a server-side lease (a Consul session, an etcd lease) alive from a thread of its own, and
// decides when the hold must count as lost. The rule that makes a network lock safe:
//
//   The server cannot expire the lease before TTL has passed since it received our last
//   acknowledged renewal, which was after we sent it. So, measured on our monotonic clock,
//       lease-safe deadline = send time of the last acknowledged renewal + TTL - margin
//   (the margin covers the two clocks running at slightly different rates). The child tree must
//   be dead by then: the stop starts one grace period earlier and SIGKILL comes at the deadline.
//
// Renewals that fail are retried 1 s apart, -monitor-retry times, but never past the point
// where the stop must start. A server saying the lease is gone is a loss at once.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "util/deadline.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace lk {

// Thrown by a renewal when the server says the lease no longer exists.
struct LeaseGone : Error {
  using Error::Error;
};

struct LeaseTiming {
  std::chrono::nanoseconds ttl;
  std::chrono::nanoseconds renew_every;
  std::chrono::nanoseconds stop_grace;  // how long stopping the child may take (-kill-after)
  int monitor_retry = 3;

  std::chrono::nanoseconds margin() const { return ttl / 10; }
  // When to start stopping, counted from the last acknowledged send: late enough to let the
  // retries run, early enough that the grace period ends at the deadline.
  std::chrono::nanoseconds stop_after() const;
};

// What the command line tells every lease-backed hold.
struct LeaseOptions {
  std::chrono::nanoseconds ttl;
  std::chrono::nanoseconds kill_after;  // the grace period the stop may take
  int monitor_retry = 3;
  std::optional<std::string> value;  // stored with the hold; a holder record when not given

  LeaseTiming timing(int renewals_per_ttl) const {
    return {ttl, ttl / renewals_per_ttl, kill_after, monitor_retry};
  }
};

class LeaseKeeper {
 public:
  // `renew` sends one renewal and returns once it is acknowledged; it throws LeaseGone, or any
  // other Error for a failure worth retrying. `granted_at` is when the lease's grant was sent.
  // `request_timeout` bounds the wait for one renewal's answer.
  using Renew = std::function<void(std::chrono::milliseconds request_timeout)>;
  LeaseKeeper(LeaseTiming timing, Clock::time_point granted_at, Renew renew);
  ~LeaseKeeper();

  // Readable once the hold is lost; reason() then says why.
  int loss_fd() const { return loss_.get(); }
  std::optional<std::string> reason() const;
  // Declares the hold lost (from any thread), e.g. when a watch sees our key deleted.
  void lose(const std::string& why);
  // When the stop must start, and the instant by which the child tree must be dead (the
  // lease-safe deadline), as of the last acknowledged renewal.
  Deadline stop_by() const;
  Deadline dead_by() const;
  void stop();  // no more renewals; returns once the thread is gone

 private:
  void run();

  LeaseTiming timing_;
  Renew renew_;
  UniqueFd loss_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  Clock::time_point last_ack_send_;
  std::optional<std::string> reason_;
  std::thread thread_;
};

}  // namespace lk
