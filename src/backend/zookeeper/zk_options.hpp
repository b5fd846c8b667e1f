#pragma once
// The ZooKeeper backend as the registry sees it: its flags and configuration (zk_options.cpp),
// and its factory and status reader (zk_backend.cpp, carried by lock-zookeeper).
#include <memory>
#include <string>

#include "backend/lease/lease_flags.hpp"
#include "backend/registry.hpp"

namespace lk {

struct ZkOptions : LeasedConfig {
  std::string
      connect;  // host:port[,host:port...][/chroot]; the TTL is the session timeout asked for
};

extern const BackendInfo kZooKeeperBackend;

std::unique_ptr<Backend> make_zk_backend(const BackendConfig& config);
PrefixStatus read_zk_status(const BackendConfig& config, const std::string& prefix,
                            const Wake* wake);

}  // namespace lk
