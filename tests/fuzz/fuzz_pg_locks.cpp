// Who holds a PostgreSQL prefix and who waits (pg_layout.hpp): the rows of kPrefixLocksSql read by
// lock_row, then status_of_locks and held_slot_limits, for the prefix "svc/web".
//
// Input: rows as libpq gives them in text, separated by byte 0x1e, their cells by 0x1f; a cell
// that is the one byte 0x00 is NULL. The cells are pg_locks' pid, granted, objsubid, classid and
// objid, then pg_stat_activity's query, application_name and host(client_addr), any text: what a
// server, or whoever wrote the statements it shows, may send.
//
// Input starting with byte 0x01: the prefix's key from the next 8 bytes (k1, k2), then rows of 8
// bytes each: pid (1 to 8, so that sessions hold both the line and a slot), flags (granted, the
// line or a 64-bit key, the statement: none, lock's, lock's cut short, a lookalike; an application
// and a client address), a limit and a slot (the slot may be none of that limit's), and the
// record's pid and token. Each row also goes through the text libpq would give for it.
//
// Either way, the first 64 rows.
//
// Input starting with byte 0x02: the rest is the int8[] column a statement that takes a turn reads
// (held_keys_column): keys_in never throws, and what it accepts comes back the same when written
// as the server writes it; held_slot_limits of those keys is as above.
//
// Invariants. lock_row never throws; a row it accepts says what its cells say (its pid, objsubid 2
// for the line, the key's two halves as unsigned oids). status_of_locks and held_slot_limits never
// throw. The holders are the sessions of the granted slots of the key, in order, then the sessions
// holding the line whose record says limit 1 (or that have no record of lock's) and hold no slot;
// the waiters, the other sessions of the line, in order; each known by its record when its
// statement carries one, else by its server process; every who() is one printable line. The limit
// is 0 exactly when nobody is there. held_slot_limits gives each limit of a held slot once, in the
// order the rows show them, each from 2 to lk::kMaxPgLimit.
#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/postgres/pg_layout.hpp"
#include "fuzz_check.hpp"

namespace {

using lk::HolderRecord;
using lk::PgKey;
using lk::PgLockRow;
using Cells = std::vector<std::optional<std::string>>;

const std::string kPrefix = "svc/web";
// More rows find nothing more, and would only slow each run down.
constexpr std::size_t kMaxRows = 64;

std::string describe(const Cells& cells) {
  std::string out;
  for (const auto& c : cells) out += (out.empty() ? "" : " | ") + (c ? fuzz::shown(*c) : "NULL");
  return out;
}

std::string describe(const PgLockRow& row) {
  return "pid " + std::to_string(row.pid) + (row.granted ? " granted" : " awaited") +
         (row.line ? " line" : " key64 " + std::to_string(row.key64)) + " statement " +
         fuzz::shown(row.statement) + " application " + fuzz::shown(row.application) + " client " +
         fuzz::shown(row.client);
}

std::optional<PgLockRow> read_row(const Cells& cells) {
  try {
    return lk::lock_row(cells);
  } catch (const std::exception& e) {
    fuzz::fail("lock_row never throws", describe(cells) + ": " + e.what(), __FILE__, __LINE__);
  } catch (...) {
    fuzz::fail("lock_row never throws", describe(cells), __FILE__, __LINE__);
  }
}

// A cell's whole number, as the server would have meant it (leading zeros too).
std::optional<long long> number(const std::optional<std::string>& cell) {
  long long n = 0;
  if (!cell) return std::nullopt;
  auto [end, ec] = std::from_chars(cell->data(), cell->data() + cell->size(), n);
  if (ec != std::errc() || end != cell->data() + cell->size()) return std::nullopt;
  return n;
}

void check_row(const Cells& cells, const PgLockRow& row) {
  FUZZ_CHECK(cells.size() == 8);
  FUZZ_CHECK_MSG(number(cells[0]) == row.pid, describe(cells));
  FUZZ_CHECK_MSG(cells[2] && *cells[2] == (row.line ? "2" : "1"), describe(cells));
  FUZZ_CHECK_MSG(cells[1] && row.granted == (*cells[1] == "t"), describe(cells));
  auto bits = static_cast<std::uint64_t>(row.key64);
  FUZZ_CHECK_MSG(number(cells[3]) == static_cast<long long>(bits >> 32), describe(cells));
  FUZZ_CHECK_MSG(number(cells[4]) == static_cast<long long>(bits & 0xffffffffu), describe(cells));
  FUZZ_CHECK_MSG(row.statement == cells[5].value_or("") &&
                     row.application == cells[6].value_or("") &&
                     row.client == cells[7].value_or(""),
                 describe(cells));
}

bool same(const HolderRecord& a, const HolderRecord& b) {
  return a.prefix == b.prefix && a.name == b.name && a.host == b.host && a.pid == b.pid &&
         a.since == b.since && a.token == b.token && a.until == b.until && a.value == b.value;
}

// Who a row's session is said to be: its record, or its server process.
bool is(const HolderRecord& who, const PgLockRow& row) {
  if (auto ours = lk::record_in(row.statement)) return same(who, ours->record);
  std::string process = "server process " + std::to_string(row.pid);
  return who.prefix == kPrefix && !who.says_who() && who.value.empty() &&
         (who.name == process || who.name.starts_with(process + ", "));
}

void check_status(const PgKey& key, const std::vector<PgLockRow>& rows) {
  // Only for a failure's report: the rows may be many and long.
  auto shown = [&rows] {
    std::string out;
    for (const auto& row : rows) out += "\n  " + describe(row);
    return out;
  };
  lk::PrefixStatus s;
  std::vector<int> limits;
  try {
    s = lk::status_of_locks(kPrefix, key, rows);
    limits = held_slot_limits(key, rows);
  } catch (const std::exception& e) {
    fuzz::fail("status_of_locks and held_slot_limits never throw", shown() + "\n" + e.what(),
               __FILE__, __LINE__);
  }

  // What the rows say, read one by one.
  std::vector<const PgLockRow*> holders, waiters;
  std::vector<int> slot_pids, slot_limits;
  for (const auto& row : rows) {
    auto slot = !row.line && row.granted ? lk::slot_of(key, row.key64) : std::nullopt;
    if (!slot) continue;
    holders.push_back(&row);
    slot_pids.push_back(row.pid);
    if (std::find(slot_limits.begin(), slot_limits.end(), slot->limit) == slot_limits.end())
      slot_limits.push_back(slot->limit);
  }
  for (const auto& row : rows) {
    if (!row.line || std::find(slot_pids.begin(), slot_pids.end(), row.pid) != slot_pids.end())
      continue;
    auto ours = lk::record_in(row.statement);
    (row.granted && (!ours || ours->limit == 1) ? holders : waiters).push_back(&row);
  }

  FUZZ_CHECK_MSG(limits == slot_limits, shown());
  for (int limit : limits) FUZZ_CHECK_MSG(limit >= 2 && limit <= lk::kMaxPgLimit, shown());
  FUZZ_CHECK_MSG(s.holders.size() == holders.size() && s.waiters.size() == waiters.size(),
                 std::to_string(s.holders.size()) + " holders and " +
                     std::to_string(s.waiters.size()) + " waiters, of" + shown());
  for (std::size_t i = 0; i < holders.size(); ++i)
    FUZZ_CHECK_MSG(is(s.holders[i], *holders[i]), "holder " + std::to_string(i) + " of" + shown());
  for (std::size_t i = 0; i < waiters.size(); ++i)
    FUZZ_CHECK_MSG(is(s.waiters[i], *waiters[i]), "waiter " + std::to_string(i) + " of" + shown());
  for (const auto* list : {&s.holders, &s.waiters})
    for (const HolderRecord& who : *list) {
      std::string text = who.who();
      FUZZ_CHECK_MSG(fuzz::printable_line(text), fuzz::shown(text));
    }
  FUZZ_CHECK_MSG((s.limit == 0) == (holders.empty() && waiters.empty()), shown());
  FUZZ_CHECK_MSG(s.limit >= 0 && !s.limit_unknown, shown());
  // A semaphore's slots say its limit, unless someone holds the line as a lock beside them.
  if (!slot_pids.empty() && holders.size() == slot_pids.size())
    FUZZ_CHECK_MSG(s.limit == *std::max_element(slot_limits.begin(), slot_limits.end()), shown());
}

void check_text(std::string_view input) {
  std::vector<PgLockRow> rows;
  for (const std::string& line : fuzz::split(input, '\x1e')) {
    if (rows.size() == kMaxRows) break;
    Cells cells;
    for (std::string& cell : fuzz::split(line, '\x1f'))
      cells.push_back(cell == std::string_view("\0", 1)
                          ? std::nullopt
                          : std::optional<std::string>(std::move(cell)));
    if (auto row = read_row(cells)) {
      check_row(cells, *row);
      rows.push_back(*row);
    }
  }
  check_status(lk::pg_key(kPrefix), rows);
}

// A record of lock's for a row, its fields from the row's bytes.
HolderRecord record_of(std::uint8_t pid, std::uint8_t token) {
  HolderRecord r;
  r.prefix = kPrefix;
  r.name = "n" + std::to_string(pid);
  r.host = "h";
  r.pid = pid;
  r.since = "2024-05-06T07:08:09Z";
  r.token = token;
  return r;
}

void check_built(std::string_view bytes) {
  PgKey key;
  if (bytes.size() < 8) return;
  std::memcpy(&key.k1, bytes.data(), 4);
  std::memcpy(&key.k2, bytes.data() + 4, 4);
  bytes.remove_prefix(8);
  std::vector<PgLockRow> rows;
  for (; bytes.size() >= 8 && rows.size() < kMaxRows; bytes.remove_prefix(8)) {
    auto b = reinterpret_cast<const std::uint8_t*>(bytes.data());
    std::uint8_t flags = b[1];
    int limit = 1 + (b[2] | b[3] << 8) % 40;
    if (flags & 0x80) limit = lk::kMaxPgLimit - limit + 3;  // near the top; one past it too
    int slot = (b[4] | b[5] << 8) % (limit + 2);            // 0 and limit + 1 are no slots
    PgLockRow row;
    row.pid = 1 + b[0] % 8;
    row.granted = flags & 1;
    row.line = flags & 2;
    row.key64 = row.line ? key.as_int64() : lk::slot_key(key, limit, slot);
    HolderRecord r = record_of(b[6], b[7]);
    switch (flags >> 2 & 3) {
      case 0: break;
      case 1: row.statement = "SELECT 1\n" + lk::record_comment(r, limit); break;
      case 2:
        row.statement = "SELECT 1\n" + lk::record_comment(r, limit);
        row.statement.resize(b[7] % row.statement.size());
        break;
      case 3: row.statement = "SELECT 1\n-- lock {\"limit\": " + std::to_string(limit) + "}"; break;
    }
    if (flags & 0x10) row.application = "app\n\x1b[31m";
    if (flags & 0x20) row.client = "127.0.0.1";
    // As libpq would give it: the same row again.
    auto bits = static_cast<std::uint64_t>(row.key64);
    Cells cells = {std::to_string(row.pid),
                   row.granted ? "t" : "f",
                   row.line ? "2" : "1",
                   std::to_string(bits >> 32),
                   std::to_string(bits & 0xffffffffu),
                   row.statement,
                   flags & 0x10 ? Cells::value_type(row.application) : std::nullopt,
                   flags & 0x20 ? Cells::value_type(row.client) : std::nullopt};
    auto read = read_row(cells);
    FUZZ_CHECK_MSG(read.has_value(), describe(cells));
    check_row(cells, *read);
    rows.push_back(row);
  }
  check_status(key, rows);
}

void check_keys(std::string_view text) {
  auto keys = lk::keys_in(std::string(text));
  if (!keys) return;
  std::string written = "{";
  for (std::size_t i = 0; i < keys->size(); ++i)
    written += (i ? "," : "") + std::to_string((*keys)[i]);
  written += "}";
  FUZZ_CHECK_MSG(lk::keys_in(written) == keys, "keys read back differ: " + written);
  for (int limit : lk::held_slot_limits(lk::pg_key("svc/web"), *keys))
    FUZZ_CHECK(limit >= 2 && limit <= lk::kMaxPgLimit);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  if (input.starts_with('\x02')) check_keys(input.substr(1));
  else if (input.starts_with('\x01')) check_built(input.substr(1));
  else check_text(input);
  return 0;
}
