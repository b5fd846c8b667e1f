#pragma once
// The etcd backend: acquires with etcd's mutex recipe (etcd_recipe.hpp) on a lease kept by
// LeaseKeeper.
#include <chrono>
#include <optional>

#include "backend/backend.hpp"
#include "backend/etcd/etcd_client.hpp"
#include "backend/lease/lease_keeper.hpp"

namespace lk {

struct EtcdBackendConfig {
  EtcdConfig client;
  LeaseOptions lease;  // the TTL in whole seconds, as etcd grants them
};

class EtcdBackend : public Backend {
 public:
  explicit EtcdBackend(EtcdBackendConfig config) : config_(std::move(config)) {}
  // Who holds `prefix` and who waits: the status reader the registry names.
  PrefixStatus read_status(const std::string& prefix, const Wake* wake);
  void watch_status(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                    const std::function<void(const PrefixStatus&)>& show) override;
  std::unique_ptr<Hold> acquire(const LockSpec& spec, Deadline deadline, const Interrupt& interrupt,
                                const Queued& queued) override;

 private:
  EtcdBackendConfig config_;
};

}  // namespace lk
