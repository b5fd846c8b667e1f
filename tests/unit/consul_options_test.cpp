// The Consul backend's flags: `consul lock`'s API flags and CONSUL_ variables, which select it,
// its session TTL and lock-delay.
#include <doctest/doctest.h>

#include <chrono>

#include "backend/consul/consul_options.hpp"
#include "options_support.hpp"

using lk::ConsulOptions;
using lk::Options;
using lk::parse_options;
using namespace lk::test;
using namespace std::chrono_literals;

namespace {

// The consul backend's configuration for `flags` (which choose it), with a prefix and a child.
ConsulOptions consul_with(Args flags) {
  flags.insert(flags.end(), {"p", "cmd"});
  return config_with<ConsulOptions>(flags, "consul");
}

}  // namespace

TEST_CASE("consul's defaults") {
  EnvScope env;
  ConsulOptions c = consul_with({"-backend", "consul"});
  CHECK(c.client.address == "127.0.0.1:8500");
  CHECK(c.client.token.empty());
  CHECK(c.token_file.empty());
  CHECK(c.client.datacenter.empty());
  CHECK_FALSE(c.client.stale);
  CHECK_FALSE(c.client.ssl);
  CHECK(c.client.tls.verify);
  CHECK(c.session_ttl == 15s);
  CHECK(c.lock_delay == 15s);
  CHECK_FALSE(c.value);
}

TEST_CASE("each API flag sets its option, selects consul and is remembered") {
  EnvScope env;
  struct Case {
    const char* flag;
    std::string (*field)(const ConsulOptions&);
  };
  const Case cases[] = {
      {"http-addr", [](const ConsulOptions& c) { return c.client.address; }},
      {"token", [](const ConsulOptions& c) { return c.client.token; }},
      {"token-file", [](const ConsulOptions& c) { return c.token_file; }},
      {"ca-file", [](const ConsulOptions& c) { return c.client.tls.ca_file; }},
      {"ca-path", [](const ConsulOptions& c) { return c.client.tls.ca_path; }},
      {"client-cert", [](const ConsulOptions& c) { return c.client.tls.client_cert; }},
      {"client-key", [](const ConsulOptions& c) { return c.client.tls.client_key; }},
      {"tls-server-name", [](const ConsulOptions& c) { return c.client.tls.server_name; }},
      {"datacenter", [](const ConsulOptions& c) { return c.client.datacenter; }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.flag);
    Options o = with({std::string("-") + c.flag, "value"});
    CHECK(o.backend == "consul");
    CHECK(o.backend_chosen_by == std::string("-") + c.flag + " selects it");
    CHECK(c.field(config_of<ConsulOptions>(o)) == "value");
  }
  Options stale = with({"-stale"});
  CHECK(stale.backend == "consul");
  CHECK(stale.backend_chosen_by == "-stale selects it");
  CHECK(config_of<ConsulOptions>(stale).client.stale);
  CHECK(consul_with({"-http-addr", "a", "-http-addr", "b"}).client.address == "b");
}

TEST_CASE("CONSUL_HTTP_ADDR selects consul only when no backend is named") {
  EnvScope env;
  env.set("CONSUL_HTTP_ADDR", "10.0.0.1:8500");
  CHECK(consul_with({}).client.address == "10.0.0.1:8500");
  CHECK(with({"-backend", "local"}).backend == "local");
  env.set("LOCK_BACKEND", "local");
  CHECK(with({}).backend == "local");
}

TEST_CASE("-http-addr overrides CONSUL_HTTP_ADDR") {
  EnvScope env;
  env.set("CONSUL_HTTP_ADDR", "env:1");
  CHECK(consul_with({"-http-addr", "flag:2"}).client.address == "flag:2");
}

// Consul's API client ignores an empty CONSUL_HTTP_ADDR, as scripts that `export
// CONSUL_HTTP_ADDR=` expect.
TEST_CASE("an empty CONSUL_HTTP_ADDR counts as unset") {
  EnvScope env;
  env.set("CONSUL_HTTP_ADDR", "");
  CHECK(with({}).backend == "local");
  CHECK(consul_with({"-backend", "consul"}).client.address == "127.0.0.1:8500");
}

TEST_CASE("the other CONSUL_ variables fill the API options without choosing consul") {
  EnvScope env;
  env.set("CONSUL_HTTP_TOKEN", "tok");
  env.set("CONSUL_HTTP_TOKEN_FILE", "/tok");
  env.set("CONSUL_CACERT", "/ca");
  env.set("CONSUL_CAPATH", "/cas");
  env.set("CONSUL_CLIENT_CERT", "/cert");
  env.set("CONSUL_CLIENT_KEY", "/key");
  env.set("CONSUL_TLS_SERVER_NAME", "srv");
  CHECK(with({}).backend == "local");
  ConsulOptions c = consul_with({"-backend", "consul"});
  CHECK(c.client.token == "tok");
  CHECK(c.token_file == "/tok");
  CHECK(c.client.tls.ca_file == "/ca");
  CHECK(c.client.tls.ca_path == "/cas");
  CHECK(c.client.tls.client_cert == "/cert");
  CHECK(c.client.tls.client_key == "/key");
  CHECK(c.client.tls.server_name == "srv");
}

TEST_CASE("CONSUL_HTTP_SSL and CONSUL_HTTP_SSL_VERIFY are Go booleans") {
  EnvScope env;
  Args consul = {"-backend", "consul"};
  env.set("CONSUL_HTTP_SSL", "true");
  CHECK(consul_with(consul).client.ssl);
  env.set("CONSUL_HTTP_SSL", "0");
  CHECK_FALSE(consul_with(consul).client.ssl);
  env.set("CONSUL_HTTP_SSL", "");
  CHECK_FALSE(consul_with(consul).client.ssl);
  // Checked whichever backend runs, as Consul's own variables always were.
  env.set("CONSUL_HTTP_SSL", "maybe");
  CHECK(error_of({"p", "cmd"}) == "invalid value \"maybe\" for CONSUL_HTTP_SSL: parse error");

  env.set("CONSUL_HTTP_SSL", "1");
  env.set("CONSUL_HTTP_SSL_VERIFY", "false");
  CHECK_FALSE(consul_with(consul).client.tls.verify);
  env.set("CONSUL_HTTP_SSL_VERIFY", "T");
  CHECK(consul_with(consul).client.tls.verify);
  env.set("CONSUL_HTTP_SSL_VERIFY", "no");
  CHECK(error_of({"p", "cmd"}) == "invalid value \"no\" for CONSUL_HTTP_SSL_VERIFY: parse error");
}

TEST_CASE("the environment variables are not flags") {
  EnvScope env;
  CHECK(error_of({"-consul-http-ssl", "p", "cmd"}) ==
        "flag provided but not defined: -consul-http-ssl");
  CHECK(error_of({"-consul-http-ssl-verify=false", "p", "cmd"}) ==
        "flag provided but not defined: -consul-http-ssl-verify");
}

TEST_CASE("API flags belong to the consul backend") {
  EnvScope env;
  CHECK(error_of({"-backend", "local", "-http-addr", "x", "p", "cmd"}) ==
        "-http-addr applies to the consul backend, not to -backend local");
  CHECK(error_of({"-http-addr", "x", "-backend", "local", "p", "cmd"}) ==
        "-http-addr applies to the consul backend, not to -backend local");
  CHECK(error_of({"-backend", "etcd", "-token", "t", "p", "cmd"}) ==
        "-token applies to the consul backend, not to -backend etcd");
  CHECK(error_of({"-backend", "zookeeper", "-stale", "p", "cmd"}) ==
        "-stale applies to the consul backend, not to -backend zookeeper");
  // Even a flag that says "no" was given, so it is refused all the same.
  CHECK(error_of({"-backend", "local", "-stale=false", "p", "cmd"}) ==
        "-stale applies to the consul backend, not to -backend local");
  env.set("LOCK_BACKEND", "local");
  CHECK(error_of({"-datacenter", "dc1", "p", "cmd"}) ==
        "-datacenter applies to the consul backend, not to -backend local");
  CHECK(with({"-backend", "consul", "-datacenter", "dc1"}).backend == "consul");
}

TEST_CASE("-session-checks ties the session to agent checks; empty to none") {
  EnvScope env;
  CHECK(!consul_with({"-backend", "consul"}).session_checks);
  CHECK(consul_with({"-backend", "consul", "-session-checks", "serfHealth, service:web,,"})
            .session_checks == std::vector<std::string>{"serfHealth", "service:web"});
  CHECK(consul_with({"-backend", "consul", "-session-checks="}).session_checks ==
        std::vector<std::string>{});
  CHECK(error_of({"-backend", "etcd", "-session-checks", "x", "p", "c"}) ==
        "-session-checks applies to the consul backend, not to -backend etcd");
}

TEST_CASE("consul's session TTL, lock-delay and value") {
  EnvScope env;
  CHECK(consul_with({"-backend", "consul", "-lock-delay", "0s"}).lock_delay == 0s);
  CHECK(consul_with({"-backend", "consul", "-value=v"}).value == "v");
  CHECK_THROWS_WITH_AS(parse_options({"-backend", "consul", "-lock-delay", "61s", "p", "c"}),
                       "-lock-delay must be between 0s and 60s, not 1m1s", lk::UsageError);
  CHECK(error_of({"-backend", "consul", "-session-ttl", "9s", "p", "c"}) ==
        "Invalid Session TTL '9s', must be between [10s=24h0m0s]");
  CHECK(error_of({"-backend", "consul", "-session-ttl", "0s", "p", "c"}) ==
        "-session-ttl must be positive");
}
