#pragma once
// A confirmed etcd hold: the lease's keeper renews it, and a watch on our own key reports at once
// when the key goes (lease revoked or expired, key deleted by hand).
#include <memory>
#include <thread>

#include "backend/backend.hpp"
#include "backend/etcd/etcd_layout.hpp"
#include "backend/etcd/etcd_lease.hpp"
#include "backend/lease/leased_hold.hpp"
#include "util/event_fd.hpp"
#include "util/unique_fd.hpp"

namespace lk {

class EtcdHold : public LeasedHold {
 public:
  // `held_at`: a revision at which our key was seen, ours, holding.
  EtcdHold(const EtcdConfig& config, std::unique_ptr<EtcdLease> lease, Contender me,
           std::string prefix, std::int64_t held_at);
  ~EtcdHold() override;

  EnvVars child_env() const override;
  void hold_until(const std::string& until) override;
  void release() override;

 private:
  LeaseKeeper& keeper() const override { return lease_->keeper(); }
  void watch_own_key(std::int64_t held_at);
  void stop_watch_soon();
  void stop_watch();

  EtcdConfig config_;
  std::unique_ptr<EtcdLease> lease_;
  Contender me_;
  std::string prefix_;
  std::int64_t held_at_;  // the revision of the reply that showed us holding
  EventFd stop_watch_;    // readable when the watch must end
  std::thread watcher_;
};

}  // namespace lk
