#include "backend/etcd/etcd_options.hpp"

#include <algorithm>
#include <chrono>

#include "net/tls_flags.hpp"
#include "util/error.hpp"

namespace lk {
namespace {

// -endpoints as etcdctl reads it: comma-separated, "http://" where no scheme is given.
std::vector<std::string> endpoint_urls(const std::string& text) {
  std::vector<std::string> urls;
  for (std::size_t start = 0; start <= text.size() && !text.empty();) {
    auto comma = std::min(text.find(',', start), text.size());
    std::string url = text.substr(start, comma - start);
    if (!url.empty()) urls.push_back(url.find("://") == std::string::npos ? "http://" + url : url);
    start = comma + 1;
  }
  return urls;
}

std::unique_ptr<BackendConfig> configure(const FlagValues& v, const Given& given) {
  auto o = std::make_unique<EtcdOptions>();
  o->read_lease_flags(v, std::chrono::seconds(10));
  EtcdConfig& c = o->client;
  c.endpoints = endpoint_urls(v.text("endpoints"));
  if (c.endpoints.empty()) c.endpoints = {"http://127.0.0.1:2379"};
  // etcdctl's own variables stand in for Consul's where no flag is given.
  c.tls = tls_options(v);
  auto etcd_env = [&](const char* flag, std::string& field, const char* env) {
    if (!given(flag)) field = env ? env_or_empty(env) : "";
  };
  etcd_env("ca-file", c.tls.ca_file, "ETCDCTL_CACERT");
  etcd_env("client-cert", c.tls.client_cert, "ETCDCTL_CERT");
  etcd_env("client-key", c.tls.client_key, "ETCDCTL_KEY");
  etcd_env("ca-path", c.tls.ca_path, nullptr);
  etcd_env("tls-server-name", c.tls.server_name, nullptr);
  std::string user = env_or_empty("ETCDCTL_USER");
  auto colon = user.find(':');
  c.user = user.substr(0, colon);
  c.password =
      colon == std::string::npos ? env_or_empty("ETCDCTL_PASSWORD") : user.substr(colon + 1);
  auto ttl = o->session_ttl;
  if (ttl < std::chrono::seconds(1) || ttl % std::chrono::seconds(1) != ttl.zero())
    throw UsageError("-session-ttl for etcd must be a whole number of seconds, at least 1s");
  return o;
}

}  // namespace

const BackendInfo kEtcdBackend{.name = "etcd",
                               .companion = "lock-net",
                               .flags = rows_of({kTlsFlags, kLeaseFlags, kEndpointsFlags}),
                               .selecting_flags = {"endpoints"},
                               .variables = {"ETCDCTL_CACERT", "ETCDCTL_CERT", "ETCDCTL_KEY",
                                             "ETCDCTL_USER", "ETCDCTL_PASSWORD"},
                               .configure = configure};

}  // namespace lk
