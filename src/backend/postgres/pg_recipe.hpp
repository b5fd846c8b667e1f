#pragma once
// The waits for a turn on PostgreSQL, on the keys pg_layout.hpp lays out: lock() is withlock's
// (one blocking pg_advisory_lock, the server's queue doing the rest), semaphore() the line of
// that same key and then the first free slot, as pg_layout.hpp argues. Both on one session, kept
// as a lease (pg_lease.hpp).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backend/lease/leased_acquire.hpp"
#include "backend/postgres/pg_layout.hpp"
#include "backend/postgres/pg_lease.hpp"

namespace lk {

class PgContention : public Contention {
 public:
  // `value`: -value, stored with our record when given. A semaphore's first in line tries the
  // slots again every `timing.wait_renew_every` for a holder that died without a word.
  PgContention(std::unique_ptr<PgLease> lease, const LockSpec& spec,
               const std::optional<std::string>& value, const LeaseTiming& timing, LeaseWait& wait);
  ~PgContention() override;

  bool lock(const Queued& queued) override;
  bool semaphore(const Queued& queued) override;
  std::unique_ptr<Hold> hold() override;
  void leave() override;

 private:
  // Runs a statement whose first column is pg_backend_pid(): its answer renews the lease.
  std::vector<PgRow> run(const std::string& sql, const std::vector<std::string>& params,
                         std::chrono::milliseconds timeout);
  std::vector<PgLockRow> prefix_locks();
  void take_line(const Queued& queued);
  // Throws the conflict when the prefix is held as a lock, or by slots of another limit.
  void check_semaphore_use();
  std::optional<int> try_slots();
  void wait_for_word(std::chrono::milliseconds at_most);
  // Returns the statement's rows: pid, token, an empty column, the server's sessions' age, then
  // `then_sql`'s, whose $1, $2, ... are `params`.
  std::vector<PgRow> take_token(const std::string& then_sql,
                                const std::vector<std::string>& params);
  // False when the wait ended first.
  bool wait_out_forgotten_holders();
  void announce();
  std::vector<std::int64_t> held_keys(const std::optional<std::string>& cell) const;

  std::unique_ptr<PgLease> lease_;
  const LockSpec& spec_;
  LeaseWait& wait_;
  Wake wake_;
  PgKey key_;
  HolderRecord record_;
  std::chrono::milliseconds retry_every_;
  std::chrono::milliseconds ttl_;
  std::optional<int> slot_;                   // a semaphore's, once taken
  std::chrono::milliseconds sessions_age_{};  // at our turn
};

}  // namespace lk
