#pragma once
// The ZooKeeper backend: Curator's mutex and semaphore (zk_recipe.hpp) on a session kept as a
// lease (zk_lease.hpp).
#include <chrono>
#include <string>

#include "backend/backend.hpp"
#include "backend/lease/lease_keeper.hpp"

namespace lk {

struct ZkBackendConfig {
  std::string connect;  // host:port[,host:port...][/chroot]
  LeaseOptions lease;   // the TTL is the session timeout asked for
};

class ZkBackend : public Backend {
 public:
  explicit ZkBackend(ZkBackendConfig config) : config_(std::move(config)) {}
  // Who holds `prefix` and who waits: the status reader the registry names.
  PrefixStatus read_status(const std::string& prefix, const Wake* wake);
  void watch_status(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                    const std::function<void(const PrefixStatus&)>& show) override;
  std::unique_ptr<Hold> acquire(const LockSpec& spec, Deadline deadline, const Interrupt& interrupt,
                                const Queued& queued) override;

 private:
  ZkBackendConfig config_;
};

}  // namespace lk
