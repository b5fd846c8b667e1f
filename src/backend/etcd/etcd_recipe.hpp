#pragma once
// etcd's mutex recipe (clientv3/concurrency's Mutex.Lock: tryAcquire, then waitDeletes), on the
// queue etcd_layout.hpp lays out and argues safe, for a lock and for a semaphore alike: one
// function per routine, on a lease made for the contention.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/etcd/etcd_backend.hpp"
#include "backend/etcd/etcd_client.hpp"
#include "backend/etcd/etcd_layout.hpp"
#include "backend/etcd/etcd_lease.hpp"
#include "backend/lease/lease_wait.hpp"
#include "backend/lease/leased_acquire.hpp"

namespace lk {

// Where the queue is: every key under "<prefix>/", [from, to).
struct QueueRange {
  explicit QueueRange(const std::string& prefix);
  // The read of all of it, oldest first; or newest first, at most `newest` keys when above 0.
  nlohmann::json request(bool with_values, bool newest_first = false,
                         std::int64_t newest = 0) const;
  // A watch on all of it, from `start_revision` on.
  nlohmann::json watch(std::int64_t start_revision) const;
  std::string from, to;
};

struct Queue {
  std::vector<Contender> contenders;  // by create revision
  std::int64_t revision = 0;          // the store's revision when it was read
};

// Everything under "<prefix>/" (up to `max_revision` when not 0), oldest first; with `newest`
// above 0, only the newest that many of those.
Queue read_queue(EtcdClient& client, const std::string& prefix, std::int64_t max_revision,
                 bool with_values, const Wake* wake = nullptr, std::int64_t newest = 0);

class EtcdContention : public Contention {
 public:
  EtcdContention(const EtcdBackendConfig& config, const LockSpec& spec,
                 std::unique_ptr<EtcdLease> lease, Deadline deadline, LeaseWait& wait);

  // Mutex.Lock: queues our key on the lease and waits until fewer than the limit are ahead of it.
  bool lock(const Queued& queued) override;
  // The same queue, with more than one let in (etcd_layout.hpp).
  bool semaphore(const Queued& queued) override { return lock(queued); }
  std::unique_ptr<Hold> hold() override;

 private:
  const EtcdBackendConfig& config_;
  const LockSpec& spec_;
  std::unique_ptr<EtcdLease> lease_;
  EtcdClient& client_;  // the lease's own connection
  Deadline deadline_;
  LeaseWait& wait_;
  Contender me_;
  std::int64_t held_at_ = 0;  // the revision of the read that showed us holding
};

}  // namespace lk
