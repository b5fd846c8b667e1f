#pragma once
// A confirmed Consul hold: the session's keeper renews it, and a monitor thread watches the hold
// with consistent blocking queries, as api.Lock's and api.Semaphore's monitors do. Only a definite
// answer ends the hold from here (our key no longer held by our session, our slot gone); a query
// that fails is asked again, since whether the hold is still confirmed is the keeper's to say.
#include <memory>
#include <thread>

#include "backend/backend.hpp"
#include "backend/consul/consul_lease.hpp"
#include "backend/lease/leased_hold.hpp"
#include "util/event_fd.hpp"

namespace lk {

struct ConsulHoldSpec {
  std::string prefix;
  int limit = 1;
  std::string key;          // .lock for a lock, the contender key for a semaphore
  std::uint64_t token = 0;  // .lock's ModifyIndex after our acquire, or after our slot
  std::string value;        // what `key` holds
};

class ConsulHold : public LeasedHold {
 public:
  ConsulHold(const ConsulConfig& config, std::unique_ptr<ConsulSession> session,
             ConsulHoldSpec spec);
  ~ConsulHold() override;

  EnvVars child_env() const override;
  void hold_until(const std::string& until) override;
  void release() override;

 private:
  LeaseKeeper& keeper() const override { return session_->keeper(); }
  void monitor();
  std::optional<std::string> still_held(const KvRead& r) const;
  void stop_monitor();
  bool monitor_pause(std::chrono::milliseconds pause) const;  // false once stopping
  bool stopping() const;

  ConsulConfig config_;
  std::unique_ptr<ConsulSession> session_;
  ConsulHoldSpec spec_;
  EventFd stop_;  // readable when the monitor must end
  std::thread monitor_;
  bool released_ = false;
};

// Gives up a semaphore slot (or a place in line) and removes .lock when nobody is left, as
// api.Semaphore's Release and Destroy do. Used on release and when a wait is abandoned.
void leave_semaphore(ConsulClient& client, const std::string& prefix, int limit,
                     const std::string& session);
// Removes .lock of a semaphore once no contender and no live holder is left (api.Semaphore's
// Destroy); a newcomer may win the race.
void tidy_semaphore(ConsulClient& client, const std::string& prefix, int limit);
// Removes an unheld .lock of a lock, as api.Lock's Destroy does; a newcomer may win the race.
void tidy_lock(ConsulClient& client, const std::string& prefix);

}  // namespace lk
