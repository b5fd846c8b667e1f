#pragma once
// The etcd backend as the registry sees it: its flags and configuration (etcd_options.cpp), and
// its factory and status reader (etcd_backend.cpp, carried by lock-net).
#include <memory>
#include <string>

#include "backend/etcd/etcd_client.hpp"
#include "backend/lease/lease_flags.hpp"
#include "backend/registry.hpp"

namespace lk {

struct EtcdOptions : LeasedConfig {
  EtcdConfig client;  // the TTL is in whole seconds, as etcd grants them
};

extern const BackendInfo kEtcdBackend;

std::unique_ptr<Backend> make_etcd_backend(const BackendConfig& config);
PrefixStatus read_etcd_status(const BackendConfig& config, const std::string& prefix,
                              const Wake* wake);

}  // namespace lk
