// The ZooKeeper backend's flags: a connect string from -endpoints or ZOOKEEPER_ENDPOINTS.
#include <doctest/doctest.h>

#include <chrono>

#include "backend/zookeeper/zk_options.hpp"
#include "options_support.hpp"

using lk::Options;
using lk::parse_options;
using lk::ZkOptions;
using namespace lk::test;
using namespace std::chrono_literals;

namespace {

ZkOptions zookeeper_with(const Args& args) { return config_with<ZkOptions>(args, "zookeeper"); }

}  // namespace

TEST_CASE("zookeeper: a connect string from the flag or ZOOKEEPER_ENDPOINTS, 127.0.0.1:2181 else") {
  EnvScope env;
  ZkOptions z = config_with<ZkOptions>(
      {"-backend", "zookeeper", "-endpoints", "zk1:2181,zk2:2181/app", "p", "c"}, "zookeeper");
  CHECK(z.connect == "zk1:2181,zk2:2181/app");  // as ZooKeeper reads it, no URL scheme added
  CHECK(z.session_ttl == 10s);

  env.set("ETCDCTL_ENDPOINTS", "http://etcd:2379");  // etcdctl's, not ours
  CHECK(zookeeper_with({"-backend", "zookeeper", "p", "c"}).connect == "127.0.0.1:2181");
  env.set("ZOOKEEPER_ENDPOINTS", "zk3:2181");
  CHECK(zookeeper_with({"-backend", "zookeeper", "p", "c"}).connect == "zk3:2181");
  env.set("LOCK_BACKEND", "zookeeper");
  CHECK(zookeeper_with({"-endpoints", "zk4:2181", "p", "c"}).connect == "zk4:2181");

  ZkOptions ttl = config_with<ZkOptions>(
      {"-backend", "zookeeper", "-session-ttl", "4500ms", "-value", "v", "p", "c"}, "zookeeper");
  CHECK(ttl.session_ttl == 4500ms);
  CHECK(ttl.value == "v");
  CHECK(error_of({"-backend", "zookeeper", "-session-ttl", "500us", "p", "c"}) ==
        "-session-ttl for ZooKeeper must be between 1ms and 596h");
  CHECK(error_of({"-backend", "zookeeper", "-token", "t", "p", "c"}) ==
        "-token applies to the consul backend, not to -backend zookeeper");
  CHECK(error_of({"-backend", "zookeeper", "-ca-file", "f", "p", "c"}) ==
        "-ca-file applies to the consul and etcd backends, not to -backend zookeeper");
}
