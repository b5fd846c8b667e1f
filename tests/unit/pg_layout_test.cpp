#include <doctest/doctest.h>

#include <climits>
#include <cstring>
#include <string_view>

#include "backend/postgres/pg_layout.hpp"
#include "backend/postgres/pg_lease.hpp"
#include "util/printable.hpp"

using namespace lk;
using Cells = std::vector<std::optional<std::string>>;

namespace {

// withlock's keys, as Python's hashlib and a PostgreSQL 15 server (the plain-SQL derivation in
// pg_layout.hpp, and pg_locks once it was taken) agree on: int.from_bytes(sha256(name)[0:4],
// "little", signed=True), then [4:8].
constexpr std::int64_t kSvcWeb = -5114200526691475511;  // 0xb906b5b798705fc9

HolderRecord record(const std::string& prefix, pid_t pid, std::uint64_t token = 0) {
  HolderRecord r;
  r.prefix = prefix;
  r.name = "worker";
  r.host = "web1";
  r.pid = pid;
  r.since = "2024-05-06T07:08:09Z";
  r.token = token;
  return r;
}

bool same(const HolderRecord& a, const HolderRecord& b) {
  return a.prefix == b.prefix && a.name == b.name && a.host == b.host && a.pid == b.pid &&
         a.since == b.since && a.token == b.token && a.until == b.until && a.value == b.value;
}

// A statement as a session of ours sends it: the comment on a line of its own, then its SQL.
std::string ours(const std::string& sql, const HolderRecord& r, int limit) {
  return record_comment(r, limit) + "\n" + sql;
}

PgLockRow line_row(int pid, bool granted, std::string statement, std::string application = "",
                   std::string client = "") {
  return {pid, granted, true, 0, std::move(statement), std::move(application), std::move(client)};
}

PgLockRow slot_row(int pid, const PgKey& key, int limit, int slot, std::string statement,
                   bool granted = true) {
  return {pid, granted, false, slot_key(key, limit, slot), std::move(statement), "lock", ""};
}

constexpr const char* kTakeLine = "SELECT pg_backend_pid(), pg_advisory_lock($1::int4, $2::int4)";

}  // namespace

TEST_CASE("postgres: a prefix's key is withlock's, the SHA-256's first eight bytes") {
  CHECK(pg_key("the/prefix").k1 == 1794195036);
  CHECK(pg_key("the/prefix").k2 == -1967364469);
  CHECK(pg_key("svc/web").k1 == -1190742601);
  CHECK(pg_key("svc/web").k2 == -1737465911);
  CHECK(pg_key("").k1 == 1120186595);
  CHECK(pg_key("").k2 == 337443992);
  CHECK(pg_key("a").k1 == 310482890);
  CHECK(pg_key("a").k2 == -893576246);
  // withlock hashes the name's UTF-8; lock hashes the prefix's bytes, whatever they are.
  CHECK(pg_key("lock/\xc3\xbcn\xc3\xaf"
               "code")
            .k1 == 521395798);
  CHECK(pg_key("lock/\xc3\xbcn\xc3\xaf"
               "code")
            .k2 == 2058750316);
  CHECK(pg_key("\xff\xfe/x").k1 == -2084535700);
  CHECK(pg_key("\xff\xfe/x").k2 == 1482906587);
  CHECK(pg_key(std::string_view("a\0b", 3)).k1 == -1368280487);
  CHECK(pg_key(std::string_view("a\0b", 3)).k2 == -743326693);
  CHECK(pg_key(std::string(300, 'x')).k1 == -1456714227);
  CHECK(pg_key(std::string(300, 'x')).k2 == -674313239);

  // As one 64-bit key: k1 the high half, k2 the low one, both as unsigned bits.
  CHECK(pg_key("svc/web").as_int64() == kSvcWeb);
  CHECK(pg_key("the/prefix").as_int64() == 7706009004593145483);
  CHECK(PgKey{0, -1}.as_int64() == 0xffffffff);
  CHECK(PgKey{-1, 0}.as_int64() == -(std::int64_t(1) << 32));
  CHECK(PgKey{INT_MIN, 0}.as_int64() == INT64_MIN);

  // pg_locks shows the two halves as oids: unsigned.
  CHECK(pg_key_params(pg_key("svc/web")) == std::vector<std::string>{"3104224695", "2557501385"});
  CHECK(pg_key_params(pg_key("the/prefix")) ==
        std::vector<std::string>{"1794195036", "2327602827"});
  CHECK(pg_key_params(PgKey{INT_MIN, -1}) == std::vector<std::string>{"2147483648", "4294967295"});

  CHECK(channel_of(pg_key("svc/web")) == "lock_b906b5b798705fc9");
  CHECK(channel_of(pg_key("")) == "lock_42c4b0e3141cfc98");
  CHECK(channel_of(PgKey{0, 1}) == "lock_0000000000000001");
  // An identifier LISTEN takes unquoted: under 64 bytes, lower case.
  CHECK(channel_of(PgKey{-1, -1}) == "lock_ffffffffffffffff");
}

TEST_CASE("postgres: a semaphore's slots, and the limit and slot a key is of") {
  PgKey key = pg_key("svc/web");
  // Slot i of limit N is K + N * 2^20 + i; these took on a real server, pg_locks agreeing.
  CHECK(slot_key(key, 3, 2) == -5114200526688329781);
  CHECK(slot_key(key, 2, 1) == -5114200526689378358);
  CHECK(slot_key(key, 2, 1) == kSvcWeb + 2 * (1 << 20) + 1);

  for (int limit : {2, 3, 17, 1000, kMaxPgLimit})
    for (int slot : {1, 2, limit / 2 + 1, limit - 1, limit}) {
      CAPTURE(limit);
      CAPTURE(slot);
      auto back = slot_of(key, slot_key(key, limit, slot));
      REQUIRE(back);
      CHECK(back->limit == limit);
      CHECK(back->slot == slot);
    }
  // Each limit's slots are its own.
  CHECK(slot_key(key, 2, 2) != slot_key(key, 3, 2));
  CHECK(slot_key(key, kMaxPgLimit, kMaxPgLimit) - key.as_int64() == (std::int64_t(1) << 40) - 1);

  // -n 1 is a lock, with no slots; the key itself and its neighbours are no slot.
  CHECK_FALSE(slot_of(key, slot_key(key, 1, 1)));
  CHECK_FALSE(slot_of(key, key.as_int64()));
  CHECK_FALSE(slot_of(key, key.as_int64() - 1));
  CHECK_FALSE(slot_of(key, key.as_int64() + 1));
  // Slot 0 and slot N+1 of a limit N.
  CHECK_FALSE(slot_of(key, slot_key(key, 3, 0)));
  CHECK_FALSE(slot_of(key, slot_key(key, 3, 4)));
  CHECK_FALSE(slot_of(key, slot_key(key, kMaxPgLimit + 1, 1)));
  // Another prefix's slots are not this one's.
  CHECK_FALSE(slot_of(key, slot_key(pg_key("svc/api"), 3, 1)));
  CHECK_FALSE(slot_of(pg_key("svc/api"), slot_key(key, 3, 1)));

  // Keys wrap around the 64-bit space as bigint does: a key near the top has slots below zero,
  // and one below zero has slots above.
  PgKey top{INT_MAX, -1};
  CHECK(top.as_int64() == INT64_MAX);
  CHECK(slot_key(top, 2, 1) < 0);
  CHECK(slot_of(top, slot_key(top, 2, 1))->slot == 1);
  CHECK(slot_of(top, slot_key(top, kMaxPgLimit, 7))->limit == kMaxPgLimit);
  PgKey minus_one{-1, -1};
  CHECK(slot_key(minus_one, 2, 1) == 2 * (1 << 20));
  CHECK(slot_of(minus_one, 2 * (1 << 20))->limit == 2);
  CHECK_FALSE(slot_of(minus_one, -1));
  CHECK_FALSE(slot_of(minus_one, INT64_MIN));
  CHECK_FALSE(slot_of(key, INT64_MIN));
  CHECK_FALSE(slot_of(key, INT64_MAX));
}

TEST_CASE("postgres: the holder record rides in a comment at the start of the statement") {
  HolderRecord r = record("svc/web", 4242, 777);
  r.until = "2024-05-06T08:00:00Z";
  std::string comment = record_comment(r, 3);
  // One line, with no NUL (libpq sends a C string) and valid UTF-8 (the server refuses anything
  // else in a UTF-8 database).
  CHECK(comment.starts_with("-- lock {"));
  CHECK(comment.find('\n') == std::string::npos);
  CHECK(comment.find('\0') == std::string::npos);
  CHECK(valid_utf8(comment));
  auto back = record_in(ours(kTakeLine, r, 3));
  REQUIRE(back);
  CHECK(back->limit == 3);
  CHECK(same(back->record, r));
  CHECK(record_in(comment));
  // Only a comment that begins the statement, as lock sends it, is read.
  CHECK_FALSE(record_in("SELECT 1\n" + comment));
  CHECK_FALSE(record_in(" " + comment + "\nSELECT 1"));

  // Any limit -n takes.
  CHECK(record_in(ours("SELECT 1", r, INT_MAX))->limit == INT_MAX);
  CHECK(record_in(ours("SELECT 1", r, 1))->limit == 1);
}

TEST_CASE("postgres: -value and the record's texts come back byte for byte") {
  HolderRecord r = record("svc/\xff/web", 1);
  r.name = "it's \"quoted\" */ -- not the end\n-- lock {\"limit\": 9}";
  r.host = "h\xc3\x28st";
  for (std::string value :
       {std::string("10.0.0.7:8080"), std::string("'); DROP TABLE t; --"),
        std::string("a */ b /* c"), std::string("line one\nline two\r\n-- lock {}\n"),
        std::string("\xff\xfe not UTF-8 \x80"), std::string("nul \0 inside", 12),
        std::string("\xe2\x80\xa8 U+2028 and \xc2\x85 NEL"), std::string("{\"pid\": 1}"),
        std::string(200, '"'), std::string(100, '\xff')}) {
    CAPTURE(printable(value));
    r.value = value;
    std::string comment = record_comment(r, 2);
    CHECK(comment.size() <= kMaxComment);
    CHECK(comment.find('\n') == std::string::npos);
    CHECK(comment.find('\r') == std::string::npos);
    CHECK(comment.find('\0') == std::string::npos);
    CHECK(valid_utf8(comment));
    auto back = record_in(ours(kTakeLine, r, 2));
    REQUIRE(back);
    CHECK(back->limit == 2);
    CHECK(same(back->record, r));
  }
  // No -value: none written, none read.
  r.value.clear();
  CHECK(record_comment(r, 2).find("\"value\"") == std::string::npos);
  CHECK(record_in(ours(kTakeLine, r, 2))->record.value.empty());
}

TEST_CASE("postgres: statements that carry no record of ours") {
  CHECK_FALSE(record_in(""));
  CHECK_FALSE(record_in("SELECT pg_advisory_lock(-1190742601, -1737465911)"));
  CHECK_FALSE(record_in("SELECT pg_advisory_lock(1, 2)\n;"));
  // A user's comments that look like ours, but are not: not first, no record, no limit, a bad
  // limit, not JSON, JSON cut short.
  const std::string fields =
      R"("pid": 1, "token": 0, "prefix": "p", "name": "", "host": "h", "since": "")";
  CHECK_FALSE(record_in("SELECT 1\n-- lock {\"limit\": 2, " + fields + "}"));
  CHECK_FALSE(record_in("-- lock {\"limit\": 2}\nSELECT 1"));
  CHECK_FALSE(record_in("-- locked out\nSELECT 1"));
  CHECK_FALSE(record_in("-- lock"));
  CHECK_FALSE(record_in("-- lock \nSELECT 1"));
  CHECK_FALSE(record_in("-- lock [1, 2]\nSELECT 1"));
  CHECK_FALSE(record_in("-- lock {\"limit\": 2\nSELECT 1"));
  CHECK(record_in("-- lock {\"limit\": 2, " + fields + "}\nSELECT 1")->limit == 2);
  for (std::string limit : {"0", "-1", "\"2\"", "2.0", "1e0", "null", "true", "2147483648",
                            "18446744073709551615", "[2]"}) {
    CAPTURE(limit);
    CHECK_FALSE(record_in("-- lock {\"limit\": " + limit + ", " + fields + "}\nSELECT 1"));
  }
  CHECK_FALSE(
      record_in("-- lock {\"limit\": 2, \"pid\": \"1\"" + fields.substr(8) + "}\nSELECT 1"));
  CHECK_FALSE(record_in("-- lock {\"limit\": 2, " + fields + "} trailing\nSELECT 1"));

  // The first line is the one that counts: the SQL after it may hold a lookalike.
  HolderRecord r = record("svc/web", 7);
  std::string sql = "SELECT $x$\n-- lock {\"limit\": 5, " + fields + "}\n$x$";
  CHECK(record_in(ours(sql, r, 3))->limit == 3);
  CHECK(record_in(ours(sql, r, 3))->record.pid == 7);
}

TEST_CASE("postgres: the record fits where pg_stat_activity cuts the statement") {
  // track_activity_query_size (1 KiB): the statement's first 1023 bytes.
  auto seen = [](const std::string& statement) { return statement.substr(0, 1023); };
  HolderRecord r = record("svc/web", 4242, 777);
  r.value = std::string(200, 'v');
  std::string long_sql = "SELECT " + std::string(2000, '1');
  CHECK(same(record_in(seen(ours(long_sql, r, 1)))->record, r));
  // A long name (the default names the whole command) is cut, at a character's start, to fit.
  for (std::string name : {std::string(2000, 'n'), "\xc3\xa9" + std::string(1999, '\xc3')}) {
    r.name = name;
    std::string comment = record_comment(r, 1);
    CHECK(comment.size() <= kMaxComment);
    CHECK(valid_utf8(comment));
    auto back = record_in(seen(ours(long_sql, r, 1)));
    REQUIRE(back);
    CHECK(back->record.name.ends_with("..."));
    CHECK(name.starts_with(back->record.name.substr(0, back->record.name.size() - 3)));
    CHECK(back->record.value == r.value);
  }
  // A record that cannot fit even without a name is returned whole: the backend refuses it.
  r.name = "n";
  r.prefix = std::string(1100, 'p');
  CHECK(record_comment(r, 1).size() > kMaxComment);
}

TEST_CASE("postgres: a row of pg_locks, as libpq gives it in text") {
  // What kPrefixLocksSql selects, in this order: lock_row reads the cells by position.
  CHECK(std::string_view(kPrefixLocksSql)
            .starts_with("SELECT l.pid, l.granted, l.objsubid, l.classid, l.objid, a.query, "
                         "a.application_name, host(a.client_addr) FROM pg_locks l"));
  // Rows a PostgreSQL 15 server gave for prefix svc/web: a holder of the two-int4 key (objsubid
  // 2: classid k1, objid k2, as oids), a slot (objsubid 1: classid the bigint's high 32 bits,
  // objid its low ones), and withlock waiting.
  PgKey key = pg_key("svc/web");
  auto row =
      lock_row({"2726", "t", "2", "3104224695", "2557501385", "SELECT 1", "lock", "127.0.0.1"});
  REQUIRE(row);
  CHECK(row->pid == 2726);
  CHECK(row->granted);
  CHECK(row->line);
  CHECK(row->key64 == key.as_int64());  // the line's key, as one 64-bit number
  CHECK(row->statement == "SELECT 1");
  CHECK(row->application == "lock");
  CHECK(row->client == "127.0.0.1");

  row = lock_row({"2780", "t", "1", "3104224695", "2560647115", "q", "lock", "127.0.0.1"});
  REQUIRE(row);
  CHECK_FALSE(row->line);
  CHECK(row->key64 == slot_key(key, 3, 2));
  CHECK(slot_of(key, row->key64)->limit == 3);
  CHECK(slot_of(key, row->key64)->slot == 2);

  // A session over the unix socket has no client address; a session pg_stat_activity does not
  // show (another role's, without pg_read_all_stats) has no statement either.
  row = lock_row(
      {"2764", "f", "2", "3104224695", "2557501385", std::nullopt, std::nullopt, std::nullopt});
  REQUIRE(row);
  CHECK_FALSE(row->granted);
  CHECK(row->statement.empty());
  CHECK(row->application.empty());
  CHECK(row->client.empty());

  // The extremes of the oids.
  row = lock_row({"1", "t", "1", "4294967295", "4294967295", "", "", ""});
  CHECK(row->key64 == -1);
  row = lock_row({"1", "t", "1", "2147483648", "0", "", "", ""});
  CHECK(row->key64 == INT64_MIN);
  row = lock_row({"1", "t", "1", "0", "5", "", "", ""});
  CHECK(row->key64 == 5);

  // What does not fit is left out.
  const Cells good = {"2726", "t", "2", "3104224695", "2557501385", "", "", ""};
  REQUIRE(lock_row(good));
  CHECK_FALSE(lock_row({}));
  CHECK_FALSE(lock_row(Cells(good.begin(), good.end() - 1)));
  Cells longer = good;
  longer.push_back("x");
  CHECK_FALSE(lock_row(longer));
  for (std::size_t column : {0, 1, 2, 3, 4}) {
    CAPTURE(column);
    Cells cells = good;
    cells[column] = std::nullopt;  // a prepared transaction's lock has no pid
    CHECK_FALSE(lock_row(cells));
    if (column == 1) continue;
    cells[column] = "";
    CHECK_FALSE(lock_row(cells));
    cells[column] = "x";
    CHECK_FALSE(lock_row(cells));
  }
  auto with = [&](std::size_t column, const char* text) {
    Cells cells = good;
    cells[column] = text;
    return lock_row(cells);
  };
  CHECK_FALSE(with(0, "12x"));
  CHECK_FALSE(with(0, "99999999999"));
  CHECK_FALSE(with(2, "0"));
  CHECK_FALSE(with(2, "3"));
  CHECK_FALSE(with(2, "02"));
  CHECK_FALSE(with(3, "-1"));
  CHECK_FALSE(with(3, "+1"));
  CHECK_FALSE(with(3, "4294967296"));
  CHECK_FALSE(with(4, " 5"));
  CHECK_FALSE(with(4, "5 "));
  CHECK_FALSE(with(1, "f")->granted);
}

TEST_CASE("postgres: who holds a lock and who waits, in the order they came") {
  const std::string prefix = "svc/web";
  PgKey key = pg_key(prefix);
  CHECK(status_of_locks(prefix, key, {}).limit == 0);
  CHECK(status_of_locks(prefix, key, {}).holders.empty());

  HolderRecord holder = record(prefix, 101, 777), second = record(prefix, 102);
  holder.value = "10.0.0.7:8080";
  PrefixStatus s = status_of_locks(
      prefix, key,
      {line_row(2726, true, ours("SELECT pg_backend_pid()", holder, 1), "lock", "127.0.0.1"),
       line_row(2745, false, ours(kTakeLine, second, 1), "lock", "127.0.0.1"),
       line_row(2764, false, "SELECT pg_advisory_lock(-1190742601, -1737465911)", "withlock",
                "10.1.2.3"),
       line_row(2790, false, "")});
  CHECK(s.limit == 1);
  REQUIRE(s.holders.size() == 1);
  CHECK(same(s.holders[0], holder));
  REQUIRE(s.waiters.size() == 3);
  CHECK(same(s.waiters[0], second));
  // Sessions of nobody's are known by the server's process, their application and address.
  CHECK(s.waiters[1].name == "server process 2764, withlock, from 10.1.2.3");
  CHECK(s.waiters[1].prefix == prefix);
  CHECK_FALSE(s.waiters[1].says_who());
  CHECK(s.waiters[2].name == "server process 2790");

  // withlock holding it: a lock's holder too.
  s = status_of_locks(prefix, key,
                      {line_row(7, true, "SELECT pg_advisory_lock(1, 2)", "", "::1"),
                       line_row(8, false, ours(kTakeLine, second, 1))});
  CHECK(s.limit == 1);
  REQUIRE(s.holders.size() == 1);
  CHECK(s.holders[0].name == "server process 7, from ::1");
  REQUIRE(s.waiters.size() == 1);
  CHECK(s.waiters[0].pid == 102);

  // A holder whose record was cut short (one too long for the backend to send) is one of
  // nobody's, still the holder.
  HolderRecord long_value = holder;
  long_value.value = std::string(2000, 'v');
  s = status_of_locks(prefix, key,
                      {line_row(9, true, ours(kTakeLine, long_value, 1).substr(0, 1023), "lock")});
  REQUIRE(s.holders.size() == 1);
  CHECK(s.holders[0].name == "server process 9, lock");
  CHECK(s.limit == 1);
}

TEST_CASE("postgres: a semaphore's holders are its slots, its first in line waits") {
  const std::string prefix = "svc/web";
  PgKey key = pg_key(prefix);
  HolderRecord a = record(prefix, 201, 900), b = record(prefix, 202, 901), c = record(prefix, 203),
               d = record(prefix, 204);
  std::vector<PgLockRow> rows = {
      // As kPrefixLocksSql orders them: the line's (held first, then its waiters as they came),
      // then the slots.
      line_row(13, true, ours("SELECT pg_backend_pid(), (SELECT s FROM ...)", c, 3)),
      line_row(14, false, ours(kTakeLine, d, 3)),
      line_row(15, false, "SELECT pg_advisory_lock(1, 2)", "psql"),
      slot_row(11, key, 3, 2, ours("SELECT pg_backend_pid()", a, 3)),
      slot_row(12, key, 3, 1, ours("SELECT pg_backend_pid()", b, 3)),
      slot_row(16, key, 3, 3, "SELECT pg_advisory_lock(42)"),
  };
  PrefixStatus s = status_of_locks(prefix, key, rows);
  CHECK(s.limit == 3);
  CHECK_FALSE(s.limit_unknown);
  REQUIRE(s.holders.size() == 3);
  CHECK(same(s.holders[0], a));
  CHECK(same(s.holders[1], b));
  CHECK(s.holders[2].name == "server process 16, lock");
  REQUIRE(s.waiters.size() == 3);
  CHECK(same(s.waiters[0], c));
  CHECK(same(s.waiters[1], d));
  CHECK(s.waiters[2].name == "server process 15, psql");
  CHECK(held_slot_limits(key, rows) == std::vector<int>{3});

  // The first in line alone: the semaphore's limit is its record's.
  s = status_of_locks(prefix, key, {line_row(13, true, ours(kTakeLine, c, 5))});
  CHECK(s.limit == 5);
  CHECK(s.holders.empty());
  REQUIRE(s.waiters.size() == 1);
  CHECK(same(s.waiters[0], c));

  // One that took its slot and is letting the line go holds both for a moment: a holder, once.
  s = status_of_locks(
      prefix, key,
      {line_row(11, true, ours(kTakeLine, a, 3)), slot_row(11, key, 3, 1, ours(kTakeLine, a, 3))});
  CHECK(s.limit == 3);
  REQUIRE(s.holders.size() == 1);
  CHECK(s.waiters.empty());

  // A slot of nobody's tells the limit by its key alone.
  s = status_of_locks(prefix, key, {slot_row(16, key, 4, 4, "")});
  CHECK(s.limit == 4);
  REQUIRE(s.holders.size() == 1);
  CHECK(s.holders[0].name == "server process 16, lock");

  // Not slots of ours: one awaited (not granted), a key beside the slots, another prefix's
  // whose classid is near ours, limit 1's "slot".
  std::vector<PgLockRow> others = {
      slot_row(21, key, 3, 1, "", false),
      {22, true, false, key.as_int64() + 1, "", "", ""},
      {23, true, false, slot_key(key, 3, 0), "", "", ""},
      {24, true, false, slot_key(key, 3, 4), "", "", ""},
      {25, true, false, slot_key(PgKey{key.k1, key.k2 - 5}, 3, 1), "", "", ""},
      {26, true, false, slot_key(key, 1, 1), "", "", ""},
  };
  s = status_of_locks(prefix, key, others);
  CHECK(s.limit == 0);
  CHECK(s.holders.empty());
  CHECK(s.waiters.empty());
  CHECK(held_slot_limits(key, others).empty());
}

TEST_CASE("postgres: the limits of the held slots, a conflict when more than one") {
  PgKey key = pg_key("svc/web");
  CHECK(held_slot_limits(key, std::vector<lk::PgLockRow>{}).empty());
  // The line, held or awaited, is no slot.
  CHECK(held_slot_limits(key, {line_row(1, true, ""), line_row(2, false, "")}).empty());
  std::vector<PgLockRow> rows = {slot_row(1, key, 3, 1, ""),
                                 slot_row(2, key, 3, 3, ""),
                                 slot_row(3, key, 2, 1, ""),
                                 slot_row(4, key, 3, 2, ""),
                                 slot_row(5, key, kMaxPgLimit, kMaxPgLimit, ""),
                                 slot_row(6, key, 7, 1, "", false)};
  CHECK(held_slot_limits(key, rows) == std::vector<int>{3, 2, kMaxPgLimit});
  // Another prefix's slots say nothing of this one.
  CHECK(held_slot_limits(pg_key("svc/api"), rows).empty());
}

TEST_CASE("postgres: the held keys a statement that takes a turn reads, an int8[] as text") {
  PgKey key = pg_key("svc/web");
  CHECK(keys_in(std::nullopt) == std::vector<std::int64_t>{});  // NULL: none held
  CHECK(keys_in("{}") == std::vector<std::int64_t>{});
  std::string held = "{" + std::to_string(slot_key(key, 3, 2)) + "," +
                     std::to_string(slot_key(key, 2, 1)) + ",-9223372036854775808}";
  auto keys = keys_in(held);
  REQUIRE(keys);
  CHECK(keys->size() == 3);
  CHECK(held_slot_limits(key, *keys) == std::vector<int>{3, 2});
  for (std::string bad : {"", "{", "}", "{1,}", "{,1}", "{1,,2}", "{ 1}", "{1 }", "{x}",
                          "{9223372036854775808}", "{1,2", "1,2}", "{NULL}", "{{1}}"}) {
    CAPTURE(bad);
    CHECK_FALSE(keys_in(bad));
  }
}

TEST_CASE("postgres: the server process that answered a statement") {
  CHECK(pid_in({{"2726"}}, "db") == 2726);
  CHECK(pid_in({{"2726", "t"}}, "db") == 2726);
  CHECK(pid_in({{std::to_string(INT_MAX)}}, "db") == INT_MAX);
  CHECK_THROWS_AS(pid_in({}, "db"), PgUnreachable);
  CHECK_THROWS_AS(pid_in({{}}, "db"), PgUnreachable);
  CHECK_THROWS_AS(pid_in({{"1"}, {"2"}}, "db"), PgUnreachable);
  CHECK_THROWS_AS(pid_in({{std::nullopt}}, "db"), PgUnreachable);
  CHECK_THROWS_WITH_AS(pid_in({{""}}, "db"), "db: an answer that names no server process",
                       PgUnreachable);
  CHECK_THROWS_AS(pid_in({{"x"}}, "db"), PgUnreachable);
  CHECK_THROWS_AS(pid_in({{"0"}}, "db"), PgUnreachable);
  CHECK_THROWS_AS(pid_in({{"-5"}}, "db"), PgUnreachable);
  CHECK_THROWS_AS(pid_in({{"99999999999"}}, "db"), PgUnreachable);
}
