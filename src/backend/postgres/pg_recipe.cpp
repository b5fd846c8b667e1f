#include "backend/postgres/pg_recipe.hpp"

#include <algorithm>

#include "backend/postgres/pg_hold.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kNoTimeout{0};  // a wait for a turn: only the wake ends it
constexpr milliseconds kStatementTimeout{5000};

// Ends a statement that takes a lock: a pooler in transaction mode may hand it to another server
// session than ours, which would then hold the lock for as long as the pooler keeps it, past our
// exit. Such a statement takes nothing and answers no row, which PgLease::answered refuses.
const std::string kOnlyOurs = " WHERE pg_backend_pid() = ";

// The slots of `limit`, as an array literal for unnest($1::bigint[]).
std::string slot_array(const PgKey& key, int limit) {
  std::string out = "{";
  for (int slot = 1; slot <= limit; ++slot)
    out += (slot > 1 ? "," : "") + std::to_string(slot_key(key, limit, slot));
  return out + "}";
}

// How long ago the server's sessions began: its start, or its last recovery from a crash (which
// ends every session but keeps pg_postmaster_start_time(); the statistics it throws away then
// are reset at that moment), in whole milliseconds of the server's clock.
constexpr const char* kSessionsAgeSql =
    "floor(1000 * extract(epoch FROM clock_timestamp() - greatest(pg_postmaster_start_time(), "
    "pg_stat_get_bgwriter_stat_reset_time())))::int8";

milliseconds age_in(const std::optional<std::string>& cell, const std::string& where) {
  auto age = cell_number<std::int64_t>(cell);
  if (!age) throw PgUnreachable(where + ": an age that is no number");
  return milliseconds(*age);
}

std::uint64_t token_in(const std::vector<PgRow>& rows, const std::string& where) {
  auto token = cell_number<std::uint64_t>(rows.at(0).at(1));
  if (!token || !*token) throw PgUnreachable(where + ": a transaction ID that is no number");
  return *token;
}

}  // namespace

PgContention::PgContention(std::unique_ptr<PgLease> lease, const LockSpec& spec,
                           const std::optional<std::string>& value, const LeaseTiming& timing,
                           LeaseWait& wait)
    : lease_(std::move(lease)),
      spec_(spec),
      wait_(wait),
      wake_(wait.wake()),
      key_(pg_key(spec.prefix)),
      record_(HolderRecord::for_this_process(spec.prefix, spec.session_name)),
      retry_every_(std::chrono::duration_cast<milliseconds>(timing.wait_renew_every)),
      ttl_(std::chrono::duration_cast<milliseconds>(timing.ttl)) {
  record_.value = value.value_or("");
  std::string comment = record_comment(record_, spec.limit);
  if (comment.size() > kMaxComment)
    throw Error(
        "the prefix and -value are too long for PostgreSQL: its holder record must "
        "fit in " +
        std::to_string(kMaxComment) +
        " bytes, as pg_stat_activity, "
        "where others read it, shows the first 1 KiB of a statement");
  lease_->connection().set_comment(std::move(comment));
}

PgContention::~PgContention() { leave(); }

std::vector<PgRow> PgContention::run(const std::string& sql, const std::vector<std::string>& params,
                                     milliseconds timeout) {
  auto sent = Clock::now();
  auto rows = lease_->connection().run(sql, params, timeout, &wake_);
  lease_->answered(sent, rows.empty() ? 0 : pid_in(rows, lease_->connection().where()));
  return rows;
}

std::vector<PgLockRow> PgContention::prefix_locks() {
  std::vector<PgLockRow> rows;
  for (const auto& cells :
       lease_->connection().run(kPrefixLocksSql, pg_key_params(key_), kStatementTimeout, &wake_))
    if (auto row = lock_row(cells)) rows.push_back(*row);
  return rows;
}

// The lock's key; for a semaphore, its line. The server queues us behind whoever has it.
void PgContention::take_line(const Queued& queued) {
  queued();
  run("SELECT pg_backend_pid(), pg_advisory_lock($1::int4, $2::int4)" + kOnlyOurs + "$3::int4",
      {std::to_string(key_.k1), std::to_string(key_.k2), std::to_string(lease_->backend_pid())},
      kNoTimeout);
}

// The fencing token, taken once the turn came, with `then` in the same statement (its columns
// follow the pid and the token). A transaction that writes nothing commits without waiting for
// the disk, and a crash would then hand its ID out again: the message (logical decoding's, read
// by nobody) makes its commit wait until it is on disk.
std::vector<PgRow> PgContention::take_token(const std::string& then,
                                            const std::vector<std::string>& params) {
  auto rows =
      run("SELECT pg_backend_pid(), pg_current_xact_id()::text, "
          "pg_logical_emit_message(true, 'lock', ''), " +
              std::string(kSessionsAgeSql) + then,
          params, kStatementTimeout);
  record_.token = token_in(rows, lease_->connection().where());
  lease_->connection().set_comment(record_comment(record_, spec_.limit));
  sessions_age_ = age_in(rows.at(0).at(3), lease_->connection().where());
  return rows;
}

// A server that restarted, or recovered from a crash, forgot every session it had, and hands a
// lock on at once; but a holder cut off from it meanwhile still runs its child until its
// lease-safe deadline, at most a TTL after its last renewal was sent, which was before the
// server went down. So a turn that came within a TTL of the server's sessions beginning starts
// only once that TTL has passed (on the server's clock, which measured the age). This rests on
// every contender of the prefix giving the same -session-ttl, as the units of one fleet do.
bool PgContention::wait_out_forgotten_holders() {
  if (sessions_age_ >= ttl_) return true;
  // A server clock stepped back since the start makes the age negative: the wait is a TTL at most.
  auto left = ttl_ - std::max(sessions_age_, milliseconds(0));
  verbose(
      "{}: the server's sessions began {} ms ago (a start, or a recovery from a crash); a holder "
      "it forgot may run until -session-ttl after that: holding the lock, our turn begins in {} ms",
      lease_->connection().where(), sessions_age_.count(), left.count());
  // A pause may end early (a notice to print): only the wait's end, or the time, ends this one.
  for (Deadline by = Deadline::after(left); !by.passed();) {
    wait_.pause(by.left(left));
    if (!wait_.keep_going()) return false;
  }
  return true;
}

// The prefix's listeners (-status -watch) hear of the turn taken once the statement that tells
// them shows the token in pg_stat_activity: the next statement after take_token().
void PgContention::announce() {
  run("SELECT pg_backend_pid(), pg_notify($1, '')", {channel_of(key_)}, kStatementTimeout);
}

std::vector<std::int64_t> PgContention::held_keys(const std::optional<std::string>& cell) const {
  auto keys = keys_in(cell);
  if (!keys)
    throw PgUnreachable(lease_->connection().where() + ": a list of locks that is no list");
  return *keys;
}

bool PgContention::lock(const Queued& queued) {
  take_line(queued);
  // A semaphore's holders came first (they take their slots only while they hold this key).
  auto rows = take_token(", " + held_keys_column(1), {pg_key_params(key_)[0]});
  auto limits = held_slot_limits(key_, held_keys(rows.at(0).at(4)));
  if (!limits.empty())
    throw not_lock_use(printable(spec_.prefix) + " is a semaphore of " + std::to_string(limits[0]) +
                       " slots");
  if (!wait_out_forgotten_holders()) return false;
  announce();
  verbose("{}: acquired the advisory lock ({}, {}) of {} (fencing token {})",
          lease_->connection().where(), key_.k1, key_.k2, printable(spec_.prefix), record_.token);
  return true;
}

bool PgContention::semaphore(const Queued& queued) {
  if (spec_.limit > kMaxPgLimit)
    throw Error("-n on PostgreSQL is at most " + std::to_string(kMaxPgLimit));
  // A lock's holder, or another limit's, refuses us now, as on the other backends, rather than
  // once we are first in line; only the first in line's look is final.
  check_semaphore_use();
  take_line(queued);
  lease_->connection().run("LISTEN " + channel_of(key_), {}, kStatementTimeout, &wake_);
  for (;;) {
    if ((slot_ = try_slots())) break;
    verbose("all {} slots of {} are taken; waiting for a holder to let one go", spec_.limit,
            printable(spec_.prefix));
    wait_for_word(retry_every_);
  }
  lease_->connection().run("UNLISTEN *", {}, kStatementTimeout, &wake_);
  take_token(", pg_advisory_unlock($1::int4, $2::int4)",
             {std::to_string(key_.k1), std::to_string(key_.k2)});
  if (!wait_out_forgotten_holders()) return false;
  announce();
  verbose("{}: took slot {} of {} of {} (fencing token {})", lease_->connection().where(), *slot_,
          spec_.limit, printable(spec_.prefix), record_.token);
  return true;
}

void PgContention::check_semaphore_use() {
  auto rows = prefix_locks();
  if (held_by_a_lock(rows)) throw not_semaphore_use(printable(spec_.prefix) + " is a lock");
  for (int theirs : held_slot_limits(key_, rows))
    if (theirs != spec_.limit) throw limit_conflict(theirs, spec_.limit);
}

// The first free slot, taken; nullopt when every one is held. The first that
// pg_try_advisory_lock gets ends the scan (LIMIT 1), so that no second one is taken. The same
// statement reads the slots held for another limit: a conflict then lets go of ours with the
// session, before any child ran.
std::optional<int> PgContention::try_slots() {
  auto rows =
      run("SELECT pg_backend_pid(), (SELECT s FROM unnest($1::bigint[]) WITH ORDINALITY "
          "AS t(k, s) WHERE pg_try_advisory_lock(k) LIMIT 1), " +
              held_keys_column(3) + kOnlyOurs + "$2::int4",
          {slot_array(key_, spec_.limit), std::to_string(lease_->backend_pid()),
           pg_key_params(key_)[0]},
          kStatementTimeout);
  for (int theirs : held_slot_limits(key_, held_keys(rows.at(0).at(2))))
    if (theirs != spec_.limit) throw limit_conflict(theirs, spec_.limit);
  const auto& cell = rows.at(0).at(1);
  if (!cell) return std::nullopt;
  auto slot = cell_number<int>(cell);
  if (!slot || *slot < 1 || *slot > spec_.limit)
    throw PgUnreachable(lease_->connection().where() + ": a slot that is no slot of ours");
  return slot;
}

// Until a holder says it let a slot go (NOTIFY), or `at_most`: one that died said nothing.
void PgContention::wait_for_word(milliseconds at_most) {
  PgConnection& connection = lease_->connection();
  for (Deadline by = Deadline::after(at_most); !by.passed();)
    if (connection.await_unasked(by, wake_) == PgConnection::Unasked::sent &&
        !connection.take_unasked().empty())
      return;
}

std::unique_ptr<Hold> PgContention::hold() {
  lease_->watch_for_end();
  return std::make_unique<PgHold>(std::move(lease_), key_, slot_, spec_.limit, record_);
}

// Closing the session leaves the line, and lets go of anything it took.
void PgContention::leave() {
  if (lease_) lease_->end();
}

}  // namespace lk
