#pragma once
// The Consul backend as the registry sees it: its flags and configuration (consul_options.cpp),
// and its factory and status reader (consul_backend.cpp, carried by lock-net).
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/consul/consul_client.hpp"
#include "backend/lease/lease_flags.hpp"
#include "backend/registry.hpp"

namespace lk {

struct ConsulOptions : LeasedConfig {
  ConsulConfig client;     // its token not yet read from token_file
  std::string token_file;  // -token-file: when given and not empty, its token wins
  std::chrono::nanoseconds lock_delay = std::chrono::seconds(15);
  std::optional<std::vector<std::string>> session_checks;  // -session-checks, when given
};

extern const BackendInfo kConsulBackend;

std::unique_ptr<Backend> make_consul_backend(const BackendConfig& config);
PrefixStatus read_consul_status(const BackendConfig& config, const std::string& prefix,
                                const Wake* wake);

}  // namespace lk
