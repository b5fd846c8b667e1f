// The one list of backends. It is compiled into each executable with the backends that one
// carries (LOCK_WITH_HTTP, LOCK_WITH_ZOOKEEPER, LOCK_WITH_POSTGRES, LOCK_WITH_MEMORY_BACKEND): the
// static lock only knows the others' flags, and hands their runs to a companion (companion.hpp).
#include "backend/registry.hpp"

#include <iterator>

#include "util/error.hpp"

#include "backend/consul/consul_options.hpp"
#include "backend/etcd/etcd_options.hpp"
#include "backend/local/local_options.hpp"
#include "backend/postgres/pg_options.hpp"
#include "backend/zookeeper/zk_options.hpp"
#ifdef LOCK_WITH_MEMORY_BACKEND
#include "memory_backend/memory_options.hpp"
#endif

#ifdef LOCK_WITH_HTTP
#define LOCK_NET(make, read_status) make, read_status
#else
#define LOCK_NET(make, read_status) nullptr, nullptr
#endif
#ifdef LOCK_WITH_ZOOKEEPER
#define LOCK_ZOOKEEPER(make, read_status) make, read_status
#else
#define LOCK_ZOOKEEPER(make, read_status) nullptr, nullptr
#endif
#ifdef LOCK_WITH_POSTGRES
#define LOCK_POSTGRES(make, read_status) make, read_status
#else
#define LOCK_POSTGRES(make, read_status) nullptr, nullptr
#endif

namespace lk {
namespace {

const Registered kRegistry[] = {
    {kLocalBackend, make_local_backend, read_local_status},
    {kConsulBackend, LOCK_NET(make_consul_backend, read_consul_status)},
    {kEtcdBackend, LOCK_NET(make_etcd_backend, read_etcd_status)},
    {kZooKeeperBackend, LOCK_ZOOKEEPER(make_zk_backend, read_zk_status)},
    {kPostgresBackend, LOCK_POSTGRES(make_pg_backend, read_pg_status)},
#ifdef LOCK_WITH_MEMORY_BACKEND
    {kMemoryBackend, make_memory_backend, read_memory_status},
#endif
};

}  // namespace

std::span<const Registered> registry() { return kRegistry; }

const Registered* find_backend(std::string_view name) {
  for (const Registered& b : kRegistry)
    if (b.info.name == name) return &b;
  return nullptr;
}

std::string backend_names() {
  std::string names;
  for (std::size_t i = 0; i < std::size(kRegistry); ++i)
    names += (i == 0                          ? ""
              : i + 1 == std::size(kRegistry) ? " or "
                                              : ", ") +
             std::string(kRegistry[i].info.name);
  return names;
}

const Registered& carried(std::string_view name, const std::string& chosen_by) {
  const Registered* b = find_backend(name);
  if (b && b->make) return *b;
  throw Error("the " + std::string(name) + " backend is not available in this version of lock (" +
              chosen_by + "); use -backend " + backend_names());
}

bool BackendInfo::applies(std::string_view flag) const {
  for (const FlagInfo* f : flags)
    if (f->name == flag) return true;
  return false;
}

}  // namespace lk
