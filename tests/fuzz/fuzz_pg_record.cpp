// The PostgreSQL backend's holder record (pg_layout.hpp): the comment that begins every statement
// of lock's, read back from pg_stat_activity.query by record_in.
//
// Input: a statement as pg_stat_activity shows it, from any session: lock's (perhaps cut short at
// track_activity_query_size), withlock's, an application's. record_in must return or refuse it,
// never throw; what it accepts has a limit of 1 or more and a who() of one printable line, and
// comes back unchanged, -value included, through record_comment -> record_in (which must write one
// line of UTF-8 without NUL, so that libpq sends it whole and the server takes it), its name cut
// (to a start of itself and "...", or nothing) only when it would not fit in kMaxComment bytes;
// a record that fits comes back from the statement's first 1023 bytes, as pg_stat_activity shows.
// Input starting with byte 0x01: a record built from the rest (NUL-separated prefix, name, host,
// since, until, -value and the statement it begins; then pid, token and limit as raw bytes), any
// bytes a user can type and any limit -n takes: what lock writes it must read back exactly, after
// any statement.
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "backend/postgres/pg_layout.hpp"
#include "fuzz_check.hpp"

namespace {

using lk::HolderRecord;
using lk::PgRecord;

bool same(const PgRecord& a, const PgRecord& b) {
  const HolderRecord &x = a.record, &y = b.record;
  return x.prefix == y.prefix && x.name == y.name && x.host == y.host && x.pid == y.pid &&
         x.since == y.since && x.token == y.token && x.until == y.until && x.value == y.value &&
         a.limit == b.limit;
}

std::string describe(const PgRecord& p) {
  const HolderRecord& r = p.record;
  return "prefix " + fuzz::shown(r.prefix) + " name " + fuzz::shown(r.name) + " host " +
         fuzz::shown(r.host) + " pid " + std::to_string(r.pid) + " since " + fuzz::shown(r.since) +
         " token " + std::to_string(r.token) + " until " + fuzz::shown(r.until) + " value " +
         fuzz::shown(r.value) + " limit " + std::to_string(p.limit);
}

std::optional<PgRecord> read(std::string_view statement) {
  try {
    return lk::record_in(statement);
  } catch (const std::exception& e) {
    fuzz::fail("record_in never throws", fuzz::shown(statement) + ": " + e.what(), __FILE__,
               __LINE__);
  } catch (...) {
    fuzz::fail("record_in never throws", fuzz::shown(statement), __FILE__, __LINE__);
  }
}

// What lock sends: a statement of its own, then the comment on the next line.
void round_trip(const PgRecord& p, std::string_view statement) {
  FUZZ_CHECK_MSG(p.limit >= 1, describe(p));
  std::string who = p.record.who();
  FUZZ_CHECK_MSG(fuzz::printable_line(who) && who.size() <= 768, fuzz::shown(who));
  std::string comment;
  try {
    comment = lk::record_comment(p.record, p.limit);
  } catch (const std::exception& e) {
    fuzz::fail("record_comment writes any record", describe(p) + ": " + e.what(), __FILE__,
               __LINE__);
  }
  FUZZ_CHECK_MSG(comment.starts_with("-- lock {") && comment.find('\n') == std::string::npos &&
                     comment.find('\r') == std::string::npos &&
                     comment.find('\0') == std::string::npos && fuzz::utf8(comment),
                 fuzz::shown(comment));
  std::string sent = comment + "\n" + std::string(statement);
  auto again = read(sent);
  FUZZ_CHECK_MSG(again.has_value(),
                 describe(p) + " sent as " + fuzz::shown(sent) + " was not read");
  PgRecord expected = p;
  if (comment != "-- lock " + lk::limited_record_json(p.record, p.limit)) {
    const std::string& name = again->record.name;
    FUZZ_CHECK_MSG(name.empty() || (name.ends_with("...") && name.size() < p.record.name.size() &&
                                    p.record.name.starts_with(name.substr(0, name.size() - 3))),
                   describe(p) + " cut as " + describe(*again));
    FUZZ_CHECK_MSG(comment.size() <= lk::kMaxComment || name.empty(), fuzz::shown(comment));
    expected.record.name = name;
  }
  FUZZ_CHECK_MSG(same(*again, expected), describe(p) + " came back as " + describe(*again));
  FUZZ_CHECK(lk::record_comment(again->record, again->limit) == comment);
  // psql sends what follows the comment's line too; pg_stat_activity shows the first 1023 bytes.
  auto with_more = read(sent + "\n;");
  FUZZ_CHECK_MSG(with_more && same(*with_more, expected), fuzz::shown(sent));
  if (comment.size() <= lk::kMaxComment) {
    auto seen = read(sent.substr(0, 1023));
    FUZZ_CHECK_MSG(seen && same(*seen, expected), fuzz::shown(sent));
  }
}

void check_statement(std::string_view statement) {
  auto p = read(statement);
  if (!p) return;
  FUZZ_CHECK_MSG(statement.starts_with("-- lock "), fuzz::shown(statement));
  round_trip(*p, "SELECT pg_backend_pid()");
}

void check_record(std::string_view bytes) {
  PgRecord p;
  auto limit = fuzz::take_tail<std::uint32_t>(bytes);
  auto pid_token = fuzz::take_tail<std::array<std::int64_t, 2>>(bytes);
  auto fields = fuzz::split(bytes, '\0');
  fields.resize(7);
  HolderRecord& r = p.record;
  r.prefix = fields[0];
  r.name = fields[1];
  r.host = fields[2];
  r.since = fields[3];
  r.until = fields[4];
  r.value = fields[5];
  r.pid = static_cast<pid_t>(pid_token[0]);
  r.token = static_cast<std::uint64_t>(pid_token[1]);
  p.limit = static_cast<int>(1 + limit % INT_MAX);  // what -n takes
  // Whatever statement it begins, even one whose text looks like a record of its own.
  round_trip(p, fields[6]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  if (input.starts_with('\x01')) check_record(input.substr(1));
  else check_statement(input);
  return 0;
}
