// The PostgreSQL backend's flags: a libpq connection string from -endpoints alone, a TTL the
// server's idle_session_timeout can take, a -value that fits pg_stat_activity.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "backend/postgres/pg_options.hpp"
#include "options_support.hpp"

using lk::PgOptions;
using namespace lk::test;
using namespace std::chrono_literals;

namespace {

PgOptions postgres_with(const Args& args) { return config_with<PgOptions>(args, "postgres"); }

}  // namespace

TEST_CASE(
    "postgres: -endpoints is the connection string; libpq's environment else, no one else's") {
  EnvScope env;
  PgOptions p =
      postgres_with({"-backend", "postgres", "-endpoints", "host=db1 dbname=ops", "p", "c"});
  CHECK(p.conninfo == "host=db1 dbname=ops");
  CHECK(p.session_ttl == 10s);
  env.set("ETCDCTL_ENDPOINTS", "http://etcd:2379");  // etcdctl's, not ours
  env.set("ZOOKEEPER_ENDPOINTS", "zk:2181");
  env.set("LOCK_BACKEND", "postgres");
  CHECK(postgres_with({"p", "c"}).conninfo.empty());
  CHECK(postgres_with({"-endpoints", "postgresql://u@h/d", "p", "c"}).conninfo ==
        "postgresql://u@h/d");
}

TEST_CASE("postgres: -session-ttl is whole milliseconds of at least a second") {
  EnvScope env;
  CHECK(postgres_with({"-backend", "postgres", "-session-ttl", "1s", "p", "c"}).session_ttl == 1s);
  CHECK(error_of({"-backend", "postgres", "-session-ttl", "999ms", "p", "c"}) ==
        "-session-ttl for PostgreSQL must be between 1s and 596h");
  CHECK(error_of({"-backend", "postgres", "-session-ttl", "597h", "p", "c"}) ==
        "-session-ttl for PostgreSQL must be between 1s and 596h");
}

TEST_CASE("postgres: -value is at most 512 bytes as JSON writes it") {
  EnvScope env;
  std::string most(512, 'v');
  CHECK(postgres_with({"-backend", "postgres", "-value", most, "p", "c"}).value == most);
  std::string refused = error_of({"-backend", "postgres", "-value", most + "v", "p", "c"});
  CHECK(refused.starts_with("-value for PostgreSQL must be at most 512 bytes written as JSON"));
  // A quote takes two bytes, a control character six.
  CHECK(error_of({"-backend", "postgres", "-value", std::string(257, '"'), "p", "c"}) == refused);
  CHECK(error_of({"-backend", "postgres", "-value", std::string(86, '\x01'), "p", "c"}) == refused);
  CHECK(error_of({"-backend", "postgres", "-value", std::string(85, '\x01'), "p", "c"}).empty());
  CHECK(error_of({"-backend", "postgres", "-token", "t", "p", "c"}) ==
        "-token applies to the consul backend, not to -backend postgres");
}
