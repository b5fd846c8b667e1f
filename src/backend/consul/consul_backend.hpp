#pragma once
// The Consul backend: Consul's lock and semaphore recipes (consul_layout.hpp) on a session
// kept by LeaseKeeper, so that lock and `consul lock` share a prefix.
#include <chrono>
#include <optional>

#include "backend/backend.hpp"
#include "backend/consul/consul_client.hpp"
#include "backend/lease/lease_keeper.hpp"

namespace lk {

struct ConsulBackendConfig {
  ConsulConfig client;
  LeaseOptions session;
  std::chrono::nanoseconds lock_delay{std::chrono::seconds(15)};
  // -session-checks: the agent checks the session is tied to; nullopt leaves Consul's default
  // (serfHealth).
  std::optional<std::vector<std::string>> session_checks;
};

class ConsulBackend : public Backend {
 public:
  explicit ConsulBackend(ConsulBackendConfig config) : config_(std::move(config)) {}
  // Who holds `prefix` and who waits: the status reader the registry names.
  PrefixStatus read_status(const std::string& prefix, const Wake* wake);
  void watch_status(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                    const std::function<void(const PrefixStatus&)>& show) override;
  std::unique_ptr<Hold> acquire(const LockSpec& spec, Deadline deadline, const Interrupt& interrupt,
                                const Queued& queued) override;

 private:
  ConsulBackendConfig config_;
};

}  // namespace lk
