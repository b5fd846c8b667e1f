#include "backend/make_backend.hpp"

#include "backend/local/local_backend.hpp"
#if defined(LOCK_WITH_HTTP) || defined(LOCK_WITH_ZOOKEEPER)
#include <fmt/format.h>
#endif
#ifdef LOCK_WITH_HTTP
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/consul/consul_backend.hpp"
#include "backend/etcd/etcd_backend.hpp"
#include "util/printable.hpp"
#include "util/unique_fd.hpp"
#endif
#ifdef LOCK_WITH_ZOOKEEPER
#include "backend/zookeeper/zk_backend.hpp"
#endif

namespace lk {

#ifdef LOCK_WITH_HTTP
// As Consul's client reads it: a token file, when given and not empty, wins over a token. A
// token is a few dozen bytes: the file is read only when it is a regular file, and only so far,
// so that a FIFO cannot hang us and /dev/zero cannot grow us without end.
static std::string consul_token(const ApiOptions& api) {
  if (api.token_file.empty()) return api.token;
  constexpr std::size_t kMaxToken = 64 << 10;
  std::string where = "the token file " + printable(api.token_file);
  UniqueFd fd(open(api.token_file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  struct stat st;
  if (!fd || fstat(fd.get(), &st) < 0) throw sys_error("cannot read " + where);
  if (!S_ISREG(st.st_mode)) throw Error(where + " is not a regular file");
  // As ssh says of a private key: a warning, since consul lock reads such a file without one.
  if (st.st_mode & (S_IRGRP | S_IROTH))
    fmt::print(stderr, "lock: {} can be read by others (mode {:04o}); chmod go-r it\n", where,
               static_cast<unsigned>(st.st_mode & 07777));
  std::string token(kMaxToken + 1, '\0');
  std::size_t got = 0;
  for (ssize_t n; got < token.size(); got += static_cast<std::size_t>(n)) {
    n = read(fd.get(), token.data() + got, token.size() - got);
    if (n < 0 && errno == EINTR) n = 0;
    else if (n < 0) throw sys_error("cannot read " + where);
    else if (n == 0) break;
  }
  if (got > kMaxToken) throw Error(where + " is larger than 64 KiB; a Consul token is a UUID");
  token.resize(got);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front()))) token.erase(0, 1);
  return token.empty() ? api.token : token;
}

static TlsOptions tls_options(const ApiOptions& api) {
  return {api.ca_file, api.ca_path, api.client_cert, api.client_key, api.tls_server_name,
          api.ssl_verify};
}
#endif

#if defined(LOCK_WITH_HTTP) || defined(LOCK_WITH_ZOOKEEPER)
static LeaseOptions lease_options(const Options& o) {
  LeaseOptions lease{o.session_ttl, o.kill_after, o.monitor_retry, o.value};
  // Flags that leave no time to renew are refused before we connect; too many retries, said once
  // (by ZooKeeper's lease for the timeout the server grants, which is the one that counts).
  if (!o.status && o.backend != "zookeeper")
    if (auto shortfall = lease.timing().shortfall()) fmt::print(stderr, "lock: {}\n", *shortfall);
  return lease;
}
#endif

bool built_in(const std::string& backend) {
#ifdef LOCK_WITH_HTTP
  if (backend == "etcd" || backend == "consul") return true;
#endif
#ifdef LOCK_WITH_ZOOKEEPER
  if (backend == "zookeeper") return true;
#endif
  return backend == "local";
}

std::unique_ptr<Backend> make_backend(const Options& o) {
  if (o.backend == "local")
    return std::make_unique<LocalBackend>(o.state_dir, o.status);
#ifdef LOCK_WITH_HTTP
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
#ifdef LOCK_WITH_ZOOKEEPER
  if (o.backend == "zookeeper") return std::make_unique<ZkBackend>(ZkBackendConfig{o.zookeeper, lease_options(o)});
#endif
  throw Error("the " + o.backend + " backend is not available in this version of lock (" +
              o.backend_chosen_by + "); use -backend local, consul, etcd or zookeeper");
}

}  // namespace lk
