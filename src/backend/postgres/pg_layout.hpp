#pragma once
// Where a prefix's locks are in PostgreSQL's advisory lock space, and why they exclude each other
// (the wait for a turn is pg_recipe.hpp; the lease, pg_lease.hpp).
//
// Keys. A prefix's lock is the advisory lock (k1, k2) that `withlock` (npm advisory-lock) takes
// for the same name: the SHA-256 of the prefix's bytes, its first eight bytes read as two
// little-endian signed 32-bit integers. So lock, withlock and an application's own
//   WITH d AS (SELECT sha256(convert_to('the/prefix', 'UTF8')) AS h)
//   SELECT pg_advisory_lock(
//     ('x' || encode(substring(h, 4, 1) || substring(h, 3, 1) || substring(h, 2, 1) ||
//                    substring(h, 1, 1), 'hex'))::bit(32)::int4,
//     ('x' || encode(substring(h, 8, 1) || substring(h, 7, 1) || substring(h, 6, 1) ||
//                    substring(h, 5, 1), 'hex'))::bit(32)::int4) FROM d;
// on the same prefix exclude each other. Advisory locks belong to one database: everyone on a
// prefix must connect to the same one.
//
// A lock (-n 1) is that one key, taken with the blocking pg_advisory_lock: the server queues its
// waiters first come, first served, and hands the lock to the first when it is let go or its
// session ends. Nothing is polled.
//
// A semaphore of N slots queues on the same key, its line: only the first in line holds it. Its
// slots are N more locks in the 64-bit key space (pg_advisory_lock(bigint)), which two-integer keys
// never meet: slot i (1 to N) of a limit N is K + N * 2^20 + i, K being (k1, k2) as one 64-bit
// number, so each limit's slots are its own and pg_locks tells a slot's limit. The first in line
// tries each slot without waiting (pg_try_advisory_lock), keeps the first it gets and lets the
// line go to the next; while none is free it waits for a holder's word (LISTEN on the prefix's
// channel, which a holder NOTIFYs as it lets its slot go) and tries again then, or at its next
// renewal for a holder that died without a word. Only the first in line listens: a release
// wakes one contender, not the line.
//
// Safety. Slots are taken only by the one who holds the line, and never waited for: at most N
// locks of a limit N are held. Before it takes one, the first in line reads the prefix's locks
// (pg_locks): a slot held for another limit is a conflict (Consul's words), reported, never
// shared. A lock holds the line for its whole hold, so no slot can be taken beside it; one that
// finds slots already held once it has the key backs out, as the semaphore's holders were there
// first. The line and the lock being one key, a semaphore's first in line and a lock's holder
// are never both.
//
// Holders. Who holds or waits is read from pg_locks, joined with pg_stat_activity: every
// statement lock sends on its session begins with a comment that carries its holder record
// (host, pid, name, since, limit, token, -value), and pg_stat_activity shows each session's last
// statement to the sessions of its role and to pg_read_all_stats. No table is made, so a role
// without CREATE holds and waits as any other. A session whose statement shows no record of ours
// (withlock's, an application's) is shown as it is seen: its client address and application.
//
// Fencing token: pg_current_xact_id(), taken right after the turn came: a 64-bit transaction ID,
// which only grows, across restarts and crashes too (its commit is on disk before it is given). A
// replica promoted after a failover goes on from what it replayed: a token taken on the old primary
// and not yet replicated can be taken again there.
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.hpp"
#include "backend/holder_record.hpp"

namespace lk {

// A cell that is a whole integer of type Int, as the server wrote it; nullopt for NULL, for
// anything else, and for one out of Int's range.
template <class Int>
std::optional<Int> cell_number(const std::optional<std::string>& cell) {
  Int n{};
  if (!cell) return std::nullopt;
  auto [end, ec] = std::from_chars(cell->data(), cell->data() + cell->size(), n);
  if (ec != std::errc() || end != cell->data() + cell->size()) return std::nullopt;
  return n;
}

// The two-integer key of a prefix: its lock, and a semaphore's line.
struct PgKey {
  std::int32_t k1 = 0, k2 = 0;
  // As one 64-bit number, the base of a semaphore's slots.
  std::int64_t as_int64() const;
};
PgKey pg_key(std::string_view prefix);

// A semaphore's slots: the keys of slot 1 to `limit`. Limits above kMaxPgLimit do not fit.
constexpr int kMaxPgLimit = (1 << 20) - 1;
std::int64_t slot_key(const PgKey& key, int limit, int slot);
// The limit and slot a 64-bit key of the prefix is one of, or nullopt for a key that is not.
struct Slot {
  int limit = 0, slot = 0;
};
std::optional<Slot> slot_of(const PgKey& key, std::int64_t key64);

// Where holders of a semaphore say they let a slot go (LISTEN/NOTIFY).
std::string channel_of(const PgKey& key);

// The comment that begins every statement of ours, its first line, and the record read back out
// of a statement (pg_stat_activity.query): nullopt for a statement that carries none.
// pg_stat_activity shows a statement's first track_activity_query_size bytes (1 KiB less its NUL
// by default): the record comes first, and is kept within kMaxComment bytes of them.
constexpr std::size_t kMaxComment = 1000;
std::string record_comment(HolderRecord record, int limit);
using PgRecord = LimitedRecord;
std::optional<PgRecord> record_in(std::string_view statement);

// One row of pg_locks on a prefix's keys, with what pg_stat_activity says of its session.
struct PgLockRow {
  int pid = 0;  // the server process of the session
  bool granted = false;
  bool line = false;       // the two-integer key (the lock, a semaphore's line); else a 64-bit one
  std::int64_t key64 = 0;  // a 64-bit key: a slot's, or a key near one
  std::string statement;   // its last statement (pg_stat_activity.query), which may be ours
  std::string application, client;  // application_name and client address, for one of nobody's
};

// Reads them, the line first, then the waiters in the order they came: `$1` and `$2` are the
// key's halves as pg_locks shows them (unsigned), pg_key_params() gives them.
extern const char* const kPrefixLocksSql;
std::vector<std::string> pg_key_params(const PgKey& key);
// A row as libpq gives it (text), or nullopt when it does not fit.
std::optional<PgLockRow> lock_row(const std::vector<std::optional<std::string>>& cells);

// Who holds the prefix and who waits, as the rows say.
PrefixStatus status_of_locks(const std::string& prefix, const PgKey& key,
                             const std::vector<PgLockRow>& rows);
// Whether lock -n 1 holds the line (a lock's key) now. A session of nobody's that holds it may be
// withlock's or another role's semaphore (whose statements this role may not see): not told.
bool held_by_a_lock(const std::vector<PgLockRow>& rows);
// The limits the prefix's held slots are for: none, or one, unless someone broke the rules.
std::vector<int> held_slot_limits(const PgKey& key, const std::vector<PgLockRow>& rows);

// The same from pg_locks alone, as a column of a statement that takes a turn (no second round
// trip, and none of pg_stat_activity's cost): the 64-bit advisory keys held in this database near
// the prefix's slots, an int8[] (NULL for none). `$n` is the key's first half, as
// pg_key_params() gives it.
std::string held_keys_column(int n);
// That column's keys, or nullopt when it is no int8[] as the server writes one.
std::optional<std::vector<std::int64_t>> keys_in(const std::optional<std::string>& cell);
std::vector<int> held_slot_limits(const PgKey& key, const std::vector<std::int64_t>& keys);

}  // namespace lk
