#pragma once
// The PostgreSQL backend: withlock's advisory lock and a semaphore on advisory locks
// (pg_recipe.hpp), on a session kept as a lease (pg_lease.hpp).
#include <string>

#include "backend/backend.hpp"
#include "backend/lease/lease_keeper.hpp"

namespace lk {

struct PgBackendConfig {
  std::string conninfo;  // a connection string or URI; empty: libpq's environment
  LeaseOptions lease;    // the TTL is the session's idle timeout
};

class PgBackend : public Backend {
 public:
  explicit PgBackend(PgBackendConfig config) : config_(std::move(config)) {}
  // Who holds `prefix` and who waits: the status reader the registry names.
  PrefixStatus read_status(const std::string& prefix, const Wake* wake);
  void watch_status(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                    const std::function<void(const PrefixStatus&)>& show) override;
  std::unique_ptr<Hold> acquire(const LockSpec& spec, Deadline deadline, const Interrupt& interrupt,
                                const Queued& queued) override;

 private:
  PgBackendConfig config_;
};

}  // namespace lk
