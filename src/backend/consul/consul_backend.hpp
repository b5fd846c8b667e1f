#pragma once
// The Consul backend: Consul's lock and semaphore recipes (consul_recipes.hpp) on a session
// kept by LeaseKeeper, so that lock and `consul lock` share a prefix.
#include <chrono>
#include <optional>

#include "backend/backend.hpp"
#include "backend/consul/consul_client.hpp"

namespace lk {

struct ConsulBackendConfig {
  ConsulConfig client;
  std::chrono::nanoseconds ttl{std::chrono::seconds(15)};
  std::chrono::nanoseconds lock_delay{std::chrono::seconds(15)};
  std::optional<std::string> value;  // stored with the hold; a holder record when not given
  std::chrono::nanoseconds kill_after{std::chrono::seconds(5)};
  int monitor_retry = 3;
};

class ConsulBackend : public Backend {
 public:
  explicit ConsulBackend(ConsulBackendConfig config) : config_(std::move(config)) {}
  PrefixStatus status(const std::string& prefix) override;
  std::unique_ptr<Hold> acquire(const LockSpec& spec, Deadline deadline,
                                const Interrupt& interrupt) override;

 private:
  ConsulBackendConfig config_;
};

}  // namespace lk
