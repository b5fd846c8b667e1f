#include <chrono>

#include "backend/backends.hpp"
#include "util/error.hpp"

namespace lk {

const BackendInfo kEtcdBackend{
    .name = "etcd",
    .companion = "lock-net",
    .own_flags = {"ca-file", "ca-path", "client-cert", "client-key", "tls-server-name", "session-ttl",
                  "value", "endpoints"},
    .selecting_flags = {"endpoints"},
    .variables = {"ETCDCTL_CACERT", "ETCDCTL_CERT", "ETCDCTL_KEY", "ETCDCTL_USER", "ETCDCTL_PASSWORD"},
    .configure = [](Options& o, const Given& given) {
      // etcdctl's own variables stand in for Consul's where no flag is given.
      auto etcd_env = [&](const char* flag, std::string& var, const char* env) {
        if (!given(flag)) var = env ? env_or_empty(env) : "";
      };
      etcd_env("ca-file", o.api.ca_file, "ETCDCTL_CACERT");
      etcd_env("client-cert", o.api.client_cert, "ETCDCTL_CERT");
      etcd_env("client-key", o.api.client_key, "ETCDCTL_KEY");
      etcd_env("ca-path", o.api.ca_path, nullptr);
      etcd_env("tls-server-name", o.api.tls_server_name, nullptr);
      std::string user = env_or_empty("ETCDCTL_USER");
      auto colon = user.find(':');
      o.etcd_user = user.substr(0, colon);
      o.etcd_password = colon == std::string::npos ? env_or_empty("ETCDCTL_PASSWORD") : user.substr(colon + 1);
      if (o.endpoints.empty()) o.endpoints = {"http://127.0.0.1:2379"};
      if (o.session_ttl.count() == 0) o.session_ttl = std::chrono::seconds(10);
      if (o.session_ttl < std::chrono::seconds(1) || o.session_ttl % std::chrono::seconds(1) != o.session_ttl.zero())
        throw UsageError("-session-ttl for etcd must be a whole number of seconds, at least 1s");
    }};

}  // namespace lk
