#include "backend/zookeeper/zk_hold.hpp"

#include <fmt/format.h>

namespace lk {

EnvVars ZkHold::child_env() const {
  return {{"LOCK_PREFIX", prefix_},
          {"LOCK_FENCING_TOKEN", std::to_string(czxid_)},
          {"LOCK_KEY", node_},
          {"LOCK_SESSION", fmt::format("{:x}", lease_->session().id())}};
}

// The change fires the watch the keeper's last look left on our node, as a change, not a
// deletion; the keeper's next look sets it again.
void ZkHold::hold_until(const std::string& until) {
  if (auto data = HolderRecord::with_until(data_, until))
    lease_->session().set(node_, *data, std::chrono::seconds(2));
}

}  // namespace lk
