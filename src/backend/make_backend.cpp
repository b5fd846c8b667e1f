#include "backend/make_backend.hpp"

#include "backend/local/local_backend.hpp"
#ifdef LOCK_WITH_NETWORK
#include <fmt/format.h>

#include <fstream>
#include <iterator>

#include "backend/consul/consul_backend.hpp"
#include "backend/etcd/etcd_backend.hpp"
#endif

namespace lk {

#ifdef LOCK_WITH_NETWORK
// As Consul's client reads it: a token file, when given and not empty, wins over a token.
static std::string consul_token(const ApiOptions& api) {
  if (api.token_file.empty()) return api.token;
  std::ifstream in(api.token_file);
  if (!in) throw sys_error("cannot read the token file " + api.token_file);
  std::string token((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front()))) token.erase(0, 1);
  return token.empty() ? api.token : token;
}

static LeaseOptions lease_options(const Options& o) {
  LeaseOptions lease{o.session_ttl, o.kill_after, o.monitor_retry, o.value};
  // Flags that leave no time to renew are refused before we connect; too many retries, said once.
  if (!o.status)
    if (auto shortfall = lease.timing().shortfall()) fmt::print(stderr, "lock: {}\n", *shortfall);
  return lease;
}

static TlsOptions tls_options(const ApiOptions& api) {
  return {api.ca_file, api.ca_path, api.client_cert, api.client_key, api.tls_server_name,
          api.ssl_verify};
}
#endif

std::unique_ptr<Backend> make_backend(const Options& o) {
  if (o.backend == "local")
    return std::make_unique<LocalBackend>(o.state_dir, o.status);
#ifdef LOCK_WITH_NETWORK
  if (o.backend == "etcd") {
    EtcdConfig client{o.endpoints, tls_options(o.api), o.etcd_user, o.etcd_password};
    return std::make_unique<EtcdBackend>(EtcdBackendConfig{client, lease_options(o)});
  }
  if (o.backend == "consul") {
    ConsulConfig client{o.api.http_addr.empty() ? "127.0.0.1:8500" : o.api.http_addr,
                        tls_options(o.api), o.api.ssl, consul_token(o.api), o.api.datacenter,
                        o.api.stale};
    return std::make_unique<ConsulBackend>(ConsulBackendConfig{client, lease_options(o), o.lock_delay});
  }
#endif
  throw Error("the " + o.backend + " backend is not available in this version of lock (" +
              o.backend_chosen_by + "); use -backend local, consul or etcd");
}

}  // namespace lk
