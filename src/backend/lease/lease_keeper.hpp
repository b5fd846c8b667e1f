#pragma once
// Keeps a server-side lease (a Consul session, an etcd lease, a ZooKeeper session) alive from a
// thread of its own, and decides when the hold must count as lost: when the stop must begin by
// the rule and budget of lease_budget.hpp, or at once when the server says the lease is gone.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "backend/lease/lease_budget.hpp"
#include "net/wake.hpp"
#include "util/deadline.hpp"
#include "util/error.hpp"
#include "util/event_fd.hpp"
#include "util/unique_fd.hpp"

namespace lk {

// Thrown by a renewal when the server says the lease no longer exists.
struct LeaseGone : Error {
  using Error::Error;
};

// What the command line tells every lease-backed hold.
struct LeaseOptions {
  std::chrono::nanoseconds ttl;
  std::chrono::nanoseconds kill_after;  // the grace period the stop may take
  int monitor_retry = 3;
  std::optional<std::string> value;  // stored with the hold; a holder record when not given

  // The budget these flags make; a UsageError naming them when they cannot keep its promise.
  LeaseTiming timing() const { return LeaseTiming::plan(ttl, kill_after, monitor_retry); }
};

class LeaseKeeper {
 public:
  // `renew` sends one renewal and returns once it is acknowledged; it throws LeaseGone, or any
  // other exception for a failure worth retrying (a ServerUnavailable's Retry-After is honoured
  // within the budget). `granted_at` is when the lease's grant was sent.
  // `request_timeout` bounds the wait for one renewal's answer, and `stop` cuts that wait short
  // (Cancelled) once renewals are over: a release must not wait on a renewal nobody needs.
  using Renew = std::function<void(std::chrono::milliseconds request_timeout, const Wake& stop)>;
  // Where the connection is the lease (a PostgreSQL session), a renewal cannot be abandoned
  // without ending it: with `await_answers`, each one's answer is awaited until the stop is due,
  // and a server that answers late (paused, a slow network) is ridden out as on the others.
  LeaseKeeper(LeaseTiming timing, Clock::time_point granted_at, Renew renew,
              bool await_answers = false);
  ~LeaseKeeper();

  // Readable once the hold is lost; reason() then says why.
  int loss_fd() const { return loss_.fd(); }
  std::optional<std::string> reason() const;
  // Declares the hold lost (from any thread), e.g. when a watch sees our key deleted.
  void lose(const std::string& why);
  // Whether the server may have let the lease go already: it is lost, or its deadline passed.
  // Then a release that cannot reach the server has nothing left to warn of.
  bool may_be_gone() const;
  // A request of the owner's, sent at `sent_at`, was answered on the lease's own session: as good
  // as a renewal where any request extends the lease (a ZooKeeper session; not an etcd lease or a
  // Consul session, which only their renewals extend).
  void confirmed(Clock::time_point sent_at);
  // Our turn came: the lease is kept for a holder from now on, if its last renewal fits a
  // holder's budget (true). If not, a renewal goes at once, and held_fd() becomes readable once
  // it is acknowledged; the child must not start before.
  bool start_holding();
  int held_fd() const { return held_.fd(); }
  // Calls `publish` with the lease-safe deadline now and after every acknowledged renewal; only
  // for a lease kept for a holder.
  void publish_deadline(std::function<void(Clock::time_point dead_by)> publish);
  void stop_soon();  // no more renewals; returns at once
  void stop();       // no more renewals; returns once the thread is gone

 private:
  void run();
  bool stopping() const;
  void succeeded(Clock::time_point sent_at);  // with mutex_ held

  Renew renew_;
  bool await_answers_;
  EventFd loss_;
  EventFd held_;  // readable once the lease is kept for a holder
  EventFd stop_;  // readable once renewals are over
  Wake stop_wake_{{stop_.fd()}, [this] { return !stopping(); }};
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  RenewalSchedule schedule_;
  int reschedules_ = 0;  // moved with the schedule from outside, so that the thread looks again
  std::optional<std::string> reason_;
  std::function<void(Clock::time_point)> publish_;
  std::thread thread_;
};

}  // namespace lk
