#include "memory_backend/memory_options.hpp"

#include "util/error.hpp"

namespace lk {
namespace {

const FlagInfo kMemoryFlags[] = {
    {.name = "memory-table",
     .env = "LOCK_MEMORY_TABLE",
     .value = Value::name,
     .help = "Table of the memory backend's locks, in this process (default: main)",
     .group = "Network Options",
     .after = "endpoints"},
};

std::unique_ptr<BackendConfig> configure(const FlagValues& v, const Given&) {
  auto o = std::make_unique<MemoryOptions>();
  o->table = v.text("memory-table");
  if (o->table.empty()) o->table = "main";
  return o;
}

}  // namespace

const BackendInfo kMemoryBackend{.name = "memory",
                                 .flags = rows_of({kMemoryFlags}),
                                 .selecting_flags = {"memory-table"},
                                 .configure = configure};

}  // namespace lk
