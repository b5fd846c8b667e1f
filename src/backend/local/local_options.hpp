#pragma once
// The local backend as the registry sees it: its flags and configuration (local_options.cpp),
// and its factory and status reader (local_backend.cpp).
#include <memory>
#include <string>

#include "backend/registry.hpp"

namespace lk {

struct LocalOptions : BackendConfig {
  std::string state_dir;  // as the user gave it; empty: the default (state_dir.hpp)
};

extern const BackendInfo kLocalBackend;

std::unique_ptr<Backend> make_local_backend(const BackendConfig& config);
PrefixStatus read_local_status(const BackendConfig& config, const std::string& prefix,
                               const Wake* wake);

}  // namespace lk
