#include "backend/postgres/pg_layout.hpp"

#include <openssl/sha.h>

#include <algorithm>
#include <cstdio>

namespace lk {
namespace {

// What begins every statement of ours: a comment to the end of the line, so that no character of
// the JSON text after it (a dump on one line) can end it early.
constexpr std::string_view kMarker = "-- lock ";

std::int32_t little_endian(const unsigned char* p) {
  std::uint32_t u = std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
                    std::uint32_t(p[3]) << 24;
  return static_cast<std::int32_t>(u);
}

// Slots of limit N start N * 2^20 past the prefix's key: each limit has its own range.
constexpr int kSlotShift = 20;

}  // namespace

std::int64_t PgKey::as_int64() const {
  return static_cast<std::int64_t>(std::uint64_t(std::uint32_t(k1)) << 32 | std::uint32_t(k2));
}

PgKey pg_key(std::string_view prefix) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(prefix.data()), prefix.size(), digest);
  return {little_endian(digest), little_endian(digest + 4)};
}

std::int64_t slot_key(const PgKey& key, int limit, int slot) {
  std::uint64_t offset = (std::uint64_t(limit) << kSlotShift) + std::uint64_t(slot);
  return static_cast<std::int64_t>(std::uint64_t(key.as_int64()) + offset);
}

std::optional<Slot> slot_of(const PgKey& key, std::int64_t key64) {
  std::uint64_t offset = std::uint64_t(key64) - std::uint64_t(key.as_int64());
  std::uint64_t limit = offset >> kSlotShift, slot = offset & ((1u << kSlotShift) - 1);
  if (limit < 2 || limit > std::uint64_t(kMaxPgLimit) || slot < 1 || slot > limit)
    return std::nullopt;
  return Slot{static_cast<int>(limit), static_cast<int>(slot)};
}

std::string channel_of(const PgKey& key) {
  char name[32];
  std::snprintf(name, sizeof name, "lock_%016llx", static_cast<unsigned long long>(key.as_int64()));
  return name;
}

// Its name is the one field nobody reads back by machine: cut (at a character's start, with "...")
// until the comment fits.
std::string record_comment(HolderRecord record, int limit) {
  for (;;) {
    std::string comment = std::string(kMarker) + limited_record_json(record, limit);
    if (comment.size() <= kMaxComment || record.name.empty()) return comment;
    // A byte of the name may take more than one of the comment (escaped, or not UTF-8): at most
    // half of it goes at a time, so that no more than needs to is cut.
    std::size_t over = comment.size() - kMaxComment + 3;
    std::size_t keep =
        over < record.name.size() / 2 ? record.name.size() - over : record.name.size() / 2;
    while (keep > 0 && (static_cast<unsigned char>(record.name[keep]) & 0xC0) == 0x80) --keep;
    record.name =
        keep > 0 && keep + 3 < record.name.size() ? record.name.substr(0, keep) + "..." : "";
  }
}

std::optional<PgRecord> record_in(std::string_view statement) {
  if (!statement.starts_with(kMarker)) return std::nullopt;
  auto text = statement.substr(kMarker.size());
  return parse_limited_record(text.substr(0, text.find('\n')));
}

const char* const kPrefixLocksSql =
    "SELECT l.pid, l.granted, l.objsubid, l.classid, l.objid, a.query, a.application_name, "
    "host(a.client_addr) FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.database = "
    "(SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND ((l.objsubid = 2 AND l.classid = $1::oid AND l.objid = $2::oid) OR "
    "(l.objsubid = 1 AND (l.classid::bigint - $1::bigint + 4294967296) % 4294967296 <= 257)) "
    "ORDER BY l.objsubid DESC, l.granted DESC, l.waitstart NULLS FIRST, l.pid";

std::vector<std::string> pg_key_params(const PgKey& key) {
  return {std::to_string(std::uint32_t(key.k1)), std::to_string(std::uint32_t(key.k2))};
}

namespace {

// One of nobody's (withlock's, an application's): known by its session, as the server sees it.
HolderRecord stranger(const std::string& prefix, const PgLockRow& row) {
  std::string name = "server process " + std::to_string(row.pid);
  if (!row.application.empty()) name += ", " + row.application;
  if (!row.client.empty()) name += ", from " + row.client;
  return HolderRecord::named(prefix, "", name);
}

}  // namespace

std::optional<PgLockRow> lock_row(const std::vector<std::optional<std::string>>& cells) {
  if (cells.size() != 8 || !cells[1] || !cells[2]) return std::nullopt;
  auto pid = cell_number<int>(cells[0]);
  auto classid = cell_number<std::uint32_t>(cells[3]), objid = cell_number<std::uint32_t>(cells[4]);
  if (!pid || !classid || !objid || (*cells[2] != "1" && *cells[2] != "2")) return std::nullopt;
  PgLockRow row;
  row.pid = *pid;
  row.granted = *cells[1] == "t";
  row.line = *cells[2] == "2";
  row.key64 = static_cast<std::int64_t>(std::uint64_t(*classid) << 32 | *objid);
  row.statement = cells[5].value_or("");
  row.application = cells[6].value_or("");
  row.client = cells[7].value_or("");
  return row;
}

bool held_by_a_lock(const std::vector<PgLockRow>& rows) {
  return std::any_of(rows.begin(), rows.end(), [](const PgLockRow& row) {
    auto ours = row.line && row.granted ? record_in(row.statement) : std::nullopt;
    return ours && ours->limit == 1;
  });
}

std::vector<int> held_slot_limits(const PgKey& key, const std::vector<PgLockRow>& rows) {
  std::vector<std::int64_t> keys;
  for (const PgLockRow& row : rows)
    if (!row.line && row.granted) keys.push_back(row.key64);
  return held_slot_limits(key, keys);
}

std::string held_keys_column(int n) {
  std::string k1 = "$" + std::to_string(n) + "::bigint";
  return "(SELECT array_agg((l.classid::bigint << 32) | l.objid::bigint) FROM pg_locks l "
         "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.database = "
         "(SELECT oid FROM pg_database WHERE datname = current_database()) AND "
         "(l.classid::bigint - " +
         k1 + " + 4294967296) % 4294967296 <= 257)";
}

std::optional<std::vector<std::int64_t>> keys_in(const std::optional<std::string>& cell) {
  std::vector<std::int64_t> keys;
  if (!cell) return keys;
  std::string_view text = *cell;
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return std::nullopt;
  text = text.substr(1, text.size() - 2);
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    auto key = cell_number<std::int64_t>(std::string(text.substr(0, comma)));
    if (!key) return std::nullopt;
    keys.push_back(*key);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return std::nullopt;  // a trailing comma
  }
  return keys;
}

std::vector<int> held_slot_limits(const PgKey& key, const std::vector<std::int64_t>& keys) {
  std::vector<int> limits;
  for (std::int64_t key64 : keys)
    if (auto slot = slot_of(key, key64))
      if (std::find(limits.begin(), limits.end(), slot->limit) == limits.end())
        limits.push_back(slot->limit);
  return limits;
}

// Holders: the lock's (the line held by a session whose record says limit 1, or by one of
// nobody's), and every held slot. Waiters: a semaphore's first in line (it holds the line), then
// the line's waiters as they came. A session that holds a slot and still the line (it is
// letting the line go) is a holder.
PrefixStatus status_of_locks(const std::string& prefix, const PgKey& key,
                             const std::vector<PgLockRow>& rows) {
  PrefixStatus s;
  std::vector<int> slot_holders;
  for (const PgLockRow& row : rows) {
    auto slot = !row.line && row.granted ? slot_of(key, row.key64) : std::nullopt;
    if (!slot) continue;
    auto ours = record_in(row.statement);
    s.holders.push_back(ours ? ours->record : stranger(prefix, row));
    s.limit = std::max(s.limit, slot->limit);
    slot_holders.push_back(row.pid);
  }
  for (const PgLockRow& row : rows) {
    if (!row.line ||
        std::find(slot_holders.begin(), slot_holders.end(), row.pid) != slot_holders.end())
      continue;
    auto ours = record_in(row.statement);
    HolderRecord who = ours ? ours->record : stranger(prefix, row);
    int limit = ours ? ours->limit : 1;
    if (row.granted && limit == 1) {
      s.holders.push_back(who);
      s.limit = 1;
    } else {
      s.waiters.push_back(who);
      if (s.limit == 0) s.limit = limit;
    }
  }
  if (s.holders.empty() && s.waiters.empty()) s.limit = 0;
  return s;
}

}  // namespace lk
