#pragma once
// The wait loops of Consul's own clients, one function per routine so that each reads beside its
// anchor in Consul's Go API: lock() is api.Lock.Lock, semaphore() is api.Semaphore.Acquire. Both
// run on one session, made for the contention and kept by a LeaseKeeper; the keys they touch
// are laid out as consul_layout.hpp says.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.hpp"
#include "backend/consul/consul_backend.hpp"
#include "backend/consul/consul_client.hpp"
#include "backend/consul/consul_lease.hpp"
#include "backend/consul/wait_index.hpp"
#include "backend/lease/lease_wait.hpp"

namespace lk {

class ConsulContention {
 public:
  // Creates the session (release behaviour for a lock, delete for a semaphore).
  ConsulContention(const ConsulBackendConfig& config, const LockSpec& spec, Deadline deadline,
                   const Interrupt& interrupt);

  // Each returns the hold once Consul's leader confirms it, and ends a wait that is over (the
  // deadline, a signal, the session lost) with give_up().
  std::unique_ptr<Hold> lock();
  std::unique_ptr<Hold> semaphore();

  // Leaves the line within one release budget, so that giving up is quick even when the agent
  // hangs, and throws why the wait ended.
  [[noreturn]] void give_up();

 private:
  // Runs `turn` until it returns the hold, with the checks and pauses between turns that every
  // wait shares.
  std::unique_ptr<Hold> wait_in_turns(const std::function<std::unique_ptr<Hold>(WaitIndex&)>& turn);

  // A blocking query on `key`, timed for WaitIndex; `pause` is how long to wait before the next.
  KvRead read(const std::string& key, bool recurse, WaitIndex& waits, std::chrono::milliseconds& pause);

  const ConsulBackendConfig& config_;
  const LockSpec& spec_;
  const Interrupt& interrupt_;
  std::unique_ptr<ConsulSession> session_;
  ConsulClient client_;
  std::string value_;  // what our key holds: -value, or a record of ours
  LeaseWait wait_;
  Wake wake_;
};

}  // namespace lk
