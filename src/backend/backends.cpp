#include "backend/backends.hpp"

#include <cstdlib>

namespace lk {

namespace {
const BackendInfo* const kBackends[] = {&kLocalBackend, &kConsulBackend, &kEtcdBackend,
                                        &kZooKeeperBackend};
}  // namespace

std::span<const BackendInfo* const> backends() { return kBackends; }

const BackendInfo* find_backend(std::string_view name) {
  for (const BackendInfo* b : kBackends)
    if (b->name == name) return b;
  return nullptr;
}

std::string backend_names() {
  std::string names;
  for (std::size_t i = 0; i < std::size(kBackends); ++i)
    names += (i == 0 ? "" : i + 1 == std::size(kBackends) ? " or " : ", ") + std::string(kBackends[i]->name);
  return names;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace lk
