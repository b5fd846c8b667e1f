#pragma once
// One etcd lease, granted on construction, kept alive by a LeaseKeeper, revoked on release or
// destruction (etcdctl leaves its lease to expire; we don't leave anything behind).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backend/etcd/etcd_client.hpp"
#include "backend/lease/lease_keeper.hpp"
#include "util/event_fd.hpp"
#include "util/unique_fd.hpp"

namespace lk {

class EtcdLease {
 public:
  // Asks for the lease until `ask_by` (within 5 s), and waits for the answer to what was asked
  // before then up to the release budget longer: a grant cut short would leave a lease whose ID
  // we never learned, which nothing revokes until etcd expires it.
  EtcdLease(const EtcdConfig& config, LeaseTiming timing, Deadline ask_by);
  ~EtcdLease();
  EtcdLease(const EtcdLease&) = delete;
  EtcdLease& operator=(const EtcdLease&) = delete;

  std::int64_t id() const { return id_; }
  LeaseKeeper& keeper() { return *keeper_; }
  // The connection the lease was granted on, and will be revoked on: the owner's thread makes
  // its own requests between the two on it too, so that a run needs no second connection.
  EtcdClient& client() { return client_; }
  // Stops renewing and revokes, which deletes every key attached to the lease in the same write.
  // Tries until `budget` passes (5xx answers and dropped connections are retried); when it could
  // not, says once on stderr that the lease will expire by itself.
  void revoke(Deadline budget);

 private:
  std::optional<std::string> send_revoke(Deadline budget);

  EtcdClient client_;  // the owner's thread's; the keeper has one of its own
  std::int64_t id_ = 0;
  std::chrono::seconds ttl_;
  std::unique_ptr<LeaseKeeper> keeper_;
  bool revoked_ = false;
};

}  // namespace lk
