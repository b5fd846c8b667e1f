// The etcd backend's flags: -endpoints, which selects it, and etcdctl's variables.
#include <doctest/doctest.h>

#include <chrono>

#include "backend/etcd/etcd_options.hpp"
#include "options_support.hpp"

using lk::EtcdOptions;
using lk::Options;
using lk::parse_options;
using namespace lk::test;
using namespace std::chrono_literals;

namespace {

EtcdOptions etcd_with(const Args& args) { return config_with<EtcdOptions>(args, "etcd"); }

}  // namespace

TEST_CASE("etcd: endpoints from the flag or ETCDCTL_ENDPOINTS, etcdctl's defaults") {
  EnvScope env;
  Options o = parse_options({"-endpoints", "http://a:2379,b:2379,", "p", "c"});
  CHECK(o.backend == "etcd");  // -endpoints alone selects etcd
  CHECK(o.backend_chosen_by == "-endpoints selects it");
  CHECK(config_of<EtcdOptions>(o).client.endpoints == Args{"http://a:2379", "http://b:2379"});
  CHECK(config_of<EtcdOptions>(o).session_ttl == 10s);

  env.set("ETCDCTL_ENDPOINTS", "https://c:2379");
  CHECK(etcd_with({"-backend", "etcd", "p", "c"}).client.endpoints == Args{"https://c:2379"});
  env.set("ETCDCTL_ENDPOINTS", "");
  CHECK(etcd_with({"-backend", "etcd", "p", "c"}).client.endpoints ==
        Args{"http://127.0.0.1:2379"});
}

TEST_CASE("etcd: etcdctl's TLS and user variables; Consul's do not apply") {
  EnvScope env;
  env.set("CONSUL_CACERT", "/consul/ca");
  env.set("ETCDCTL_CERT", "/etcd/cert");
  env.set("ETCDCTL_USER", "root:secret");
  EtcdOptions e = etcd_with({"-backend", "etcd", "p", "c"});
  CHECK(e.client.tls.ca_file == "");
  CHECK(e.client.tls.client_cert == "/etcd/cert");
  CHECK(e.client.user == "root");
  CHECK(e.client.password == "secret");
  CHECK(etcd_with({"-backend", "etcd", "-ca-file", "/mine", "p", "c"}).client.tls.ca_file ==
        "/mine");

  env.set("ETCDCTL_USER", "root");
  env.set("ETCDCTL_PASSWORD", "other");
  CHECK(etcd_with({"-backend", "etcd", "p", "c"}).client.password == "other");
}

TEST_CASE("etcd's session TTL and value") {
  EnvScope env;
  CHECK(etcd_with({"-backend", "etcd", "-session-ttl", "3s", "p", "c"}).session_ttl == 3s);
  CHECK_FALSE(etcd_with({"-backend", "etcd", "p", "c"}).value);
  CHECK(etcd_with({"-backend", "etcd", "-value=", "p", "c"}).value == "");
  CHECK(error_of({"-backend", "etcd", "-session-ttl", "0s", "p", "c"}) ==
        "-session-ttl must be positive");
  CHECK(error_of({"-backend", "etcd", "-session-ttl", "500ms", "p", "c"}) ==
        "-session-ttl for etcd must be a whole number of seconds, at least 1s");
}
