// The local backend's flags: -state-dir and LOCK_STATE_DIR.
#include <doctest/doctest.h>

#include "backend/local/local_options.hpp"
#include "options_support.hpp"

using lk::LocalOptions;
using lk::Options;
using namespace lk::test;

TEST_CASE("the local backend is the default, with the default state directory") {
  EnvScope env;
  Options o = with({});
  CHECK(o.backend == "local");
  CHECK(config_of<LocalOptions>(o).state_dir.empty());
}

TEST_CASE("-state-dir names the state directory; the last one wins") {
  EnvScope env;
  Options o = with({"-state-dir", "/some/dir"});
  CHECK(o.backend == "local");
  CHECK(config_of<LocalOptions>(o).state_dir == "/some/dir");
  Options twice = with({"-state-dir", "/a", "-state-dir", "/b"});
  CHECK(config_of<LocalOptions>(twice).state_dir == "/b");
}

TEST_CASE("an empty -state-dir is an error, not the default") {
  EnvScope env;
  CHECK(error_of({"-state-dir=", "p", "cmd"}) ==
        "-state-dir must not be empty (leave it out for the default)");
  CHECK(error_of({"-state-dir", "", "p", "cmd"}) ==
        "-state-dir must not be empty (leave it out for the default)");
}

TEST_CASE("LOCK_STATE_DIR gives the state directory; -state-dir overrides it") {
  EnvScope env;
  env.set("LOCK_STATE_DIR", "/from/env");
  Options o = with({});
  CHECK(config_of<LocalOptions>(o).state_dir == "/from/env");
  Options flag = with({"-state-dir", "/from/flag"});
  CHECK(config_of<LocalOptions>(flag).state_dir == "/from/flag");
}

TEST_CASE("an empty LOCK_STATE_DIR counts as unset") {
  EnvScope env;
  env.set("LOCK_STATE_DIR", "");
  Options o = with({});
  CHECK(config_of<LocalOptions>(o).state_dir.empty());
}

TEST_CASE("-state-dir belongs to the local backend") {
  EnvScope env;
  CHECK(error_of({"-backend", "consul", "-state-dir", "/d", "p", "cmd"}) ==
        "-state-dir applies to the local backend, not to -backend consul");
  CHECK(error_of({"-http-addr", "x", "-state-dir", "/d", "p", "cmd"}) ==
        "-state-dir applies to the local backend, not to -backend consul");
  env.set("CONSUL_HTTP_ADDR", "x");
  CHECK(error_of({"-state-dir", "/d", "p", "cmd"}) ==
        "-state-dir applies to the local backend, not to -backend consul");
}

TEST_CASE("LOCK_STATE_DIR does not stand in the way of another backend") {
  EnvScope env;
  env.set("LOCK_STATE_DIR", "/d");
  CHECK(with({"-backend", "consul"}).backend == "consul");
}
