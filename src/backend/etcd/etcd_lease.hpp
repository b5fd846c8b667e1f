#pragma once
// One etcd lease, granted on construction, kept alive by a LeaseKeeper, revoked on release or
// destruction (etcdctl leaves its lease to expire; we don't leave anything behind).
#include <chrono>
#include <cstdint>
#include <memory>

#include "backend/etcd/etcd_client.hpp"
#include "backend/lease/lease_keeper.hpp"

namespace lk {

class EtcdLease {
 public:
  EtcdLease(const EtcdConfig& config, LeaseTiming timing, std::chrono::milliseconds grant_timeout);
  ~EtcdLease();
  EtcdLease(const EtcdLease&) = delete;
  EtcdLease& operator=(const EtcdLease&) = delete;

  std::int64_t id() const { return id_; }
  LeaseKeeper& keeper() { return *keeper_; }
  // Stops renewing and revokes, which also deletes every key attached to the lease. A failure
  // only costs tidiness (the lease expires by itself), so it is reported under -verbose only.
  void revoke();

 private:
  EtcdClient client_;  // for grant and revoke, from the owner's thread
  std::int64_t id_ = 0;
  std::unique_ptr<LeaseKeeper> keeper_;
  bool revoked_ = false;
};

}  // namespace lk
