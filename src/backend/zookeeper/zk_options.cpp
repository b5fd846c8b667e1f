#include <chrono>
#include <climits>

#include "backend/backends.hpp"
#include "util/error.hpp"

namespace lk {

using namespace std::chrono_literals;

const BackendInfo kZooKeeperBackend{
    .name = "zookeeper",
    .companion = "lock-zookeeper",
    .own_flags = {"session-ttl", "value", "endpoints"},
    .variables = {"ZOOKEEPER_ENDPOINTS"},
    .configure = [](Options& o, const Given& given) {
      // The flag's own variable is etcdctl's, whose URLs mean nothing to ZooKeeper.
      if (!given("endpoints")) o.zookeeper = env_or_empty("ZOOKEEPER_ENDPOINTS");
      if (o.zookeeper.empty()) o.zookeeper = "127.0.0.1:2181";
      o.endpoints.clear();
      if (o.session_ttl.count() == 0) o.session_ttl = 10s;
      // The server clamps what it grants (2 to 20 ticks); the C client takes whole milliseconds.
      if (o.session_ttl < 1ms || o.session_ttl > std::chrono::milliseconds(INT_MAX))
        throw UsageError("-session-ttl for ZooKeeper must be between 1ms and 596h");
    }};

}  // namespace lk
