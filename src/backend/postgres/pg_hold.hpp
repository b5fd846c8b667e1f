#pragma once
// A confirmed PostgreSQL hold: the prefix's advisory lock, or one slot of a semaphore, held by
// our session, which is kept as a lease (pg_lease.hpp).
#include <memory>
#include <optional>
#include <string>

#include "backend/lease/leased_hold.hpp"
#include "backend/postgres/pg_layout.hpp"
#include "backend/postgres/pg_lease.hpp"

namespace lk {

class PgHold : public LeasedHold {
 public:
  // `slot`: a semaphore's, none for a lock. `record` carries the fencing token.
  PgHold(std::unique_ptr<PgLease> lease, PgKey key, std::optional<int> slot, int limit,
         HolderRecord record);
  ~PgHold() override;

  EnvVars child_env() const override;
  // The session's socket: the server ends the session, and lets the lock go, only once every
  // process that has it closed it, so a lock killed with SIGKILL hands nothing on while any of its
  // child tree still runs (and the server's idle timeout ends it a TTL after the last renewal).
  std::vector<int> child_fds() const override { return {lease_->connection().socket()}; }
  void hold_until(const std::string& until) override;
  void release() override;

 private:
  LeaseKeeper& keeper() const override { return lease_->keeper(); }

  std::unique_ptr<PgLease> lease_;
  PgKey key_;
  std::optional<int> slot_;
  int limit_;
  HolderRecord record_;
  bool released_ = false;
};

}  // namespace lk
