#include "backend/zookeeper/zk_hold.hpp"

#include <fmt/format.h>

namespace lk {

EnvVars ZkHold::child_env() const {
  return {{"LOCK_PREFIX", prefix_},
          {"LOCK_FENCING_TOKEN", std::to_string(czxid_)},
          {"LOCK_KEY", node_},
          {"LOCK_SESSION", fmt::format("{:x}", lease_->session().id())}};
}

}  // namespace lk
