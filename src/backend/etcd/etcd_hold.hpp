#pragma once
// A confirmed etcd hold: the lease's keeper renews it, and a watch on our own key reports at once
// when the key goes (lease revoked or expired, key deleted by hand).
#include <memory>
#include <thread>

#include "backend/backend.hpp"
#include "backend/etcd/etcd_lease.hpp"
#include "backend/etcd/etcd_queue.hpp"
#include "util/unique_fd.hpp"

namespace lk {

class EtcdHold : public Hold {
 public:
  EtcdHold(const EtcdConfig& config, std::unique_ptr<EtcdLease> lease, Contender me,
           std::string prefix);
  ~EtcdHold() override;

  int loss_fd() const override { return lease_->keeper().loss_fd(); }
  std::optional<std::string> check_loss() override { return lease_->keeper().reason(); }
  Deadline stop_by() const override { return lease_->keeper().stop_by(); }
  Deadline dead_by() const override { return lease_->keeper().dead_by(); }
  EnvVars child_env() const override;
  std::vector<int> child_fds() const override { return {}; }
  void release() override;

 private:
  void watch_own_key();
  void stop_watch();

  EtcdConfig config_;
  std::unique_ptr<EtcdLease> lease_;
  Contender me_;
  std::string prefix_;
  UniqueFd stop_watch_;  // an eventfd: readable when the watch must end
  std::thread watcher_;
};

}  // namespace lk
