#pragma once
// The memory backend: a lock table in this process, for the unit tests only. It is registered as
// a shipped backend is (one line of src/backend/registry.cpp) and lives in its own folder, with
// a flag of its own: what adding a backend takes.
#include <memory>
#include <string>

#include "backend/registry.hpp"

namespace lk {

struct MemoryOptions : BackendConfig {
  std::string table;  // -memory-table: which of this process's tables holds the locks
};

extern const BackendInfo kMemoryBackend;

std::unique_ptr<Backend> make_memory_backend(const BackendConfig& config);
PrefixStatus read_memory_status(const BackendConfig& config, const std::string& prefix,
                                const Wake* wake);

}  // namespace lk
