#include "backend/make_backend.hpp"

#include "backend/local/local_backend.hpp"
#ifdef LOCK_WITH_NETWORK
#include "backend/etcd/etcd_backend.hpp"
#endif

namespace lk {

#ifdef LOCK_WITH_NETWORK
static TlsOptions tls_options(const ApiOptions& api) {
  return {api.ca_file, api.ca_path, api.client_cert, api.client_key, api.tls_server_name,
          api.ssl_verify};
}
#endif

std::unique_ptr<Backend> make_backend(const Options& o) {
  if (o.backend == "local")
    return std::make_unique<LocalBackend>(o.state_dir, o.state_dir_is_default, o.status);
#ifdef LOCK_WITH_NETWORK
  if (o.backend == "etcd") {
    EtcdBackendConfig c;
    c.client = {o.endpoints, tls_options(o.api), o.etcd_user, o.etcd_password};
    c.ttl = std::chrono::duration_cast<std::chrono::seconds>(o.session_ttl);
    c.value = o.value;
    c.kill_after = o.kill_after;
    c.monitor_retry = o.monitor_retry;
    return std::make_unique<EtcdBackend>(std::move(c));
  }
#endif
  throw Error("the " + o.backend + " backend is not available in this version of lock (" +
              o.backend_chosen_by + "); use -backend local or -backend etcd");
}

}  // namespace lk
