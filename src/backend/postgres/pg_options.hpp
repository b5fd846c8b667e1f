#pragma once
// The PostgreSQL backend as the registry sees it: its flags and configuration (pg_options.cpp),
// and its factory and status reader (pg_backend.cpp, carried by lock-postgres).
#include <memory>
#include <string>

#include "backend/lease/lease_flags.hpp"
#include "backend/registry.hpp"

namespace lk {

struct PgOptions : LeasedConfig {
  // -endpoints: a libpq connection string or URI; empty, libpq's own environment (PGHOST,
  // PGSERVICE, ~/.pgpass, ...). Never shown: it may carry a password.
  std::string conninfo;
};

extern const BackendInfo kPostgresBackend;

std::unique_ptr<Backend> make_pg_backend(const BackendConfig& config);
PrefixStatus read_pg_status(const BackendConfig& config, const std::string& prefix,
                            const Wake* wake);

}  // namespace lk
