#include "backend/zookeeper/zk_options.hpp"

#include <chrono>
#include <climits>

#include "util/error.hpp"

namespace lk {

using namespace std::chrono_literals;

namespace {

std::unique_ptr<BackendConfig> configure(const FlagValues& v, const Given& given) {
  auto o = std::make_unique<ZkOptions>();
  o->read_lease_flags(v, 10s);
  // The flag's own variable is etcdctl's, whose URLs mean nothing to ZooKeeper.
  o->connect = given("endpoints") ? v.text("endpoints") : env_or_empty("ZOOKEEPER_ENDPOINTS");
  if (o->connect.empty()) o->connect = "127.0.0.1:2181";
  // The server clamps what it grants (2 to 20 ticks); the C client takes whole milliseconds.
  if (o->session_ttl < 1ms || o->session_ttl > std::chrono::milliseconds(INT_MAX))
    throw UsageError("-session-ttl for ZooKeeper must be between 1ms and 596h");
  return o;
}

}  // namespace

const BackendInfo kZooKeeperBackend{.name = "zookeeper",
                                    .companion = "lock-zookeeper",
                                    .flags = rows_of({kLeaseFlags, kEndpointsFlags}),
                                    .variables = {"ZOOKEEPER_ENDPOINTS"},
                                    .configure = configure};

}  // namespace lk
