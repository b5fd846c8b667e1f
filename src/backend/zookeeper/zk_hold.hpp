#pragma once
// A confirmed ZooKeeper hold: our node, kept by the session's lease (zk_lease.hpp).
#include <memory>
#include <string>

#include "backend/lease/leased_hold.hpp"
#include "backend/zookeeper/zk_lease.hpp"

namespace lk {

class ZkHold : public LeasedHold {
 public:
  // `node` is our lock or lease node; its czxid is the fencing token (sequence numbers restart
  // when a container parent is reaped and created again; zxids only grow).
  ZkHold(std::unique_ptr<ZkLease> lease, std::string node, std::int64_t czxid, std::string prefix,
         std::string data)
      : lease_(std::move(lease)),
        node_(std::move(node)),
        czxid_(czxid),
        prefix_(std::move(prefix)),
        data_(std::move(data)) {}

  EnvVars child_env() const override;
  void hold_until(const std::string& until) override;
  void release() override { lease_->end(node_); }

 private:
  LeaseKeeper& keeper() const override { return lease_->keeper(); }

  std::unique_ptr<ZkLease> lease_;
  std::string node_;
  std::int64_t czxid_;
  std::string prefix_;
  std::string data_;  // what our node carries
};

}  // namespace lk
