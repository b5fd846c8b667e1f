#include "backend/make_backend.hpp"

#include "backend/backends.hpp"
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
// Flags that leave no time to renew are refused before we connect; too many retries are said
// once, unless the backend says it itself (ZooKeeper, for the timeout the server grants, which is
// the one that counts).
static LeaseOptions lease_options(const Options& o, bool say_shortfall = true) {
  LeaseOptions lease{o.session_ttl, o.kill_after, o.monitor_retry, o.value};
  if (!o.status && say_shortfall)
    if (auto shortfall = lease.timing().shortfall()) fmt::print(stderr, "lock: {}\n", *shortfall);
  return lease;
}
#endif

namespace {

std::unique_ptr<Backend> make_local(const Options& o) {
  return std::make_unique<LocalBackend>(o.state_dir, o.status);
}

#ifdef LOCK_WITH_HTTP
std::unique_ptr<Backend> make_consul(const Options& o) {
  ConsulConfig client{o.api.http_addr.empty() ? "127.0.0.1:8500" : o.api.http_addr,
                      tls_options(o.api), o.api.ssl, consul_token(o.api), o.api.datacenter,
                      o.api.stale};
  return std::make_unique<ConsulBackend>(ConsulBackendConfig{client, lease_options(o), o.lock_delay});
}

std::unique_ptr<Backend> make_etcd(const Options& o) {
  EtcdConfig client{o.endpoints, tls_options(o.api), o.etcd_user, o.etcd_password};
  return std::make_unique<EtcdBackend>(EtcdBackendConfig{client, lease_options(o)});
}
#endif

#ifdef LOCK_WITH_ZOOKEEPER
std::unique_ptr<Backend> make_zookeeper(const Options& o) {
  return std::make_unique<ZkBackend>(ZkBackendConfig{o.zookeeper, lease_options(o, false)});
}
#endif

// The backends this executable carries, a line each; the others are its companions'.
struct BuiltIn {
  std::string_view name;
  std::unique_ptr<Backend> (*make)(const Options&);
};
constexpr BuiltIn kBuiltIn[] = {
    {"local", make_local},
#ifdef LOCK_WITH_HTTP
    {"consul", make_consul},
    {"etcd", make_etcd},
#endif
#ifdef LOCK_WITH_ZOOKEEPER
    {"zookeeper", make_zookeeper},
#endif
};

const BuiltIn* built_in_as(std::string_view backend) {
  for (const BuiltIn& b : kBuiltIn)
    if (b.name == backend) return &b;
  return nullptr;
}

}  // namespace

bool built_in(const std::string& backend) { return built_in_as(backend) != nullptr; }

std::unique_ptr<Backend> make_backend(const Options& o) {
  if (const BuiltIn* b = built_in_as(o.backend)) return b->make(o);
  throw Error("the " + o.backend + " backend is not available in this version of lock (" +
              o.backend_chosen_by + "); use -backend " + backend_names());
}

}  // namespace lk
