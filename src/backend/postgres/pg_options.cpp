#include "backend/postgres/pg_options.hpp"

#include <chrono>
#include <climits>

#include "util/error.hpp"
#include "util/json_text.hpp"

namespace lk {

using namespace std::chrono_literals;

namespace {

// Every statement carries the holder record, and pg_stat_activity shows only the first
// track_activity_query_size bytes of one (1 KiB unless the server says otherwise).
constexpr std::size_t kMaxValue = 512;

// As the holder record writes it (util/json_text.hpp): escaped, and with its exact bytes beside it
// when they are not UTF-8.
std::size_t json_size(const std::string& value) {
  nlohmann::json j = nlohmann::json::object();
  put_text(j, "v", value);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size() - 8;
}

std::unique_ptr<BackendConfig> configure(const FlagValues& v, const Given& given) {
  auto o = std::make_unique<PgOptions>();
  o->read_lease_flags(v, 10s);
  // The flag's own variable is etcdctl's; PostgreSQL's are libpq's, which it reads itself.
  if (given("endpoints")) o->conninfo = v.text("endpoints");
  // idle_session_timeout is whole milliseconds; a TTL under a second leaves no time to renew.
  if (o->session_ttl < 1s || o->session_ttl > std::chrono::milliseconds(INT_MAX))
    throw UsageError("-session-ttl for PostgreSQL must be between 1s and 596h");
  if (o->value && json_size(*o->value) > kMaxValue)
    throw UsageError(
        "-value for PostgreSQL must be at most 512 bytes written as JSON (a quote, a control "
        "character or a byte that is not UTF-8 takes more than one): pg_stat_activity, where "
        "others read it, shows the first 1 KiB of a statement");
  return o;
}

}  // namespace

const BackendInfo kPostgresBackend{.name = "postgres",
                                   .companion = "lock-postgres",
                                   .flags = rows_of({kLeaseFlags, kEndpointsFlags}),
                                   .configure = configure};

}  // namespace lk
