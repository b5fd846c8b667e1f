#pragma once
// The wait loops of Consul's own clients, one function per routine so that each reads beside its
// anchor in Consul's Go API: open_session() is their createSession, lock() is api.Lock.Lock,
// semaphore() is api.Semaphore.Acquire. Both run on one session, made for the contention and
// kept by a LeaseKeeper; the keys they touch are laid out as consul_layout.hpp says.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "backend/consul/consul_backend.hpp"
#include "backend/consul/consul_client.hpp"
#include "backend/consul/consul_hold.hpp"
#include "backend/consul/consul_lease.hpp"
#include "backend/consul/wait_index.hpp"
#include "backend/lease/lease_wait.hpp"
#include "backend/lease/leased_acquire.hpp"

namespace lk {

// The session a contention runs on: release behaviour for a lock, delete for a semaphore.
std::unique_ptr<ConsulSession> open_session(const ConsulBackendConfig& config, const LockSpec& spec,
                                            Deadline deadline, const Wake& wake);

class ConsulContention : public Contention {
 public:
  ConsulContention(const ConsulBackendConfig& config, const LockSpec& spec,
                   std::unique_ptr<ConsulSession> session, Deadline deadline, LeaseWait& wait);

  // Each is true once Consul's leader confirms our turn.
  bool lock(const Queued& queued) override;
  bool semaphore(const Queued& queued) override;
  std::unique_ptr<Hold> hold() override;
  // Deletes our contender key and destroys the session within one release budget, so that giving
  // up is quick even when the agent hangs.
  void leave() override;

 private:
  // Runs `turn` until it says our turn came, with the checks and pauses between turns that every
  // wait shares; false once the wait is over.
  bool wait_in_turns(const std::function<bool(WaitIndex&)>& turn);

  // A blocking query on `key`, timed for WaitIndex; `pause` is how long to wait before the next.
  KvRead read(const std::string& key, bool recurse, WaitIndex& waits,
              std::chrono::milliseconds& pause);

  const ConsulBackendConfig& config_;
  const LockSpec& spec_;
  std::unique_ptr<ConsulSession> session_;
  ConsulClient client_;
  std::string value_;  // what our key holds: -value, or a record of ours
  LeaseWait& wait_;
  Wake wake_;
  ConsulHoldSpec held_;   // what we hold, once our turn came
  std::string acquired_;  // what -verbose says of it
};

}  // namespace lk
