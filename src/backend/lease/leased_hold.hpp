#pragma once
// A hold carried by a server-side lease: whether it is lost, and when the child must be stopped
// and dead, are the lease keeper's to say.
#include "backend/backend.hpp"
#include "backend/lease/lease_keeper.hpp"

namespace lk {

class LeasedHold : public Hold {
 public:
  int loss_fd() const override { return keeper().loss_fd(); }
  std::optional<std::string> check_loss() override { return keeper().reason(); }
  void publish_deadline(std::function<void(Clock::time_point)> publish) override {
    keeper().publish_deadline(std::move(publish));
  }
  std::vector<int> child_fds() const override { return {}; }  // nothing local to inherit

 protected:
  virtual LeaseKeeper& keeper() const = 0;
};

}  // namespace lk
