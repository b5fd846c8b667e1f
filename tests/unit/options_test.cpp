// parse_options: `consul lock`'s flags and wording, lock's own flags, environment defaults and
// the choice of backend.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "options_support.hpp"

using lk::Options;
using lk::parse_options;
using namespace lk::test;
using namespace std::chrono_literals;

TEST_CASE("defaults") {
  EnvScope env;
  Options o = parse_options({"p", "cmd"});
  CHECK(o.limit == 1);
  CHECK(o.name == "lock for 'cmd' at 'p'");
  CHECK(o.monitor_retry == 3);
  CHECK(o.timeout == 0ns);
  CHECK(o.shell);
  CHECK_FALSE(o.pass_stdin);
  CHECK_FALSE(o.child_exit_code);
  CHECK_FALSE(o.preserve_status);
  CHECK_FALSE(o.verbose);
  CHECK(o.kill_after == 5s);
  CHECK(o.backend == "local");
  CHECK(o.prefix == "p");
  CHECK(o.child == Args{"cmd"});
  CHECK_FALSE(o.help);
  CHECK_FALSE(o.version);
}

TEST_CASE("-n sets the holder limit") {
  EnvScope env;
  CHECK(with({"-n", "3"}).limit == 3);
  CHECK(with({"-n=1"}).limit == 1);
  CHECK(with({"--n=42"}).limit == 42);
}

TEST_CASE("-name sets the session name instead of the generated one") {
  EnvScope env;
  CHECK(with({"-name", "my job"}).name == "my job");
  CHECK(with({"-name=a=b"}).name == "a=b");
}

TEST_CASE("the generated name joins the child words with spaces and uses the cleaned prefix") {
  EnvScope env;
  CHECK(parse_options({"a/b/", "echo", "hi there", "x"}).name ==
        "lock for 'echo hi there x' at 'a/b'");
}

TEST_CASE("-monitor-retry") {
  EnvScope env;
  CHECK(with({"-monitor-retry", "0"}).monitor_retry == 0);
  CHECK(with({"-monitor-retry=7"}).monitor_retry == 7);
}

TEST_CASE("-timeout takes a Go duration") {
  EnvScope env;
  CHECK(with({"-timeout", "1.5s"}).timeout == 1500ms);
  CHECK(with({"-timeout=2m"}).timeout == 2min);
  CHECK(with({"-timeout", "0"}).timeout == 0ns);
  CHECK(with({"-timeout", "1h2m3s4ms5us6ns"}).timeout == 1h + 2min + 3s + 4ms + 5us + 6ns);
}

TEST_CASE("-try is the same setting as -timeout") {
  EnvScope env;
  CHECK(with({"-try", "3s"}).timeout == 3s);
  CHECK(with({"-try=250ms"}).timeout == 250ms);
  CHECK(with({"-timeout", "1s", "-try", "2s"}).timeout == 2s);
  CHECK(with({"-try", "2s", "-timeout", "1s"}).timeout == 1s);
  CHECK(error_of({"-try", "-1s", "p", "cmd"}) == "Timeout must be positive");
  CHECK(error_of({"-try"}) == "flag needs an argument: -try");
}

TEST_CASE("boolean flags") {
  EnvScope env;
  CHECK_FALSE(with({"-shell=false"}).shell);
  CHECK_FALSE(with({"-shell=0"}).shell);
  CHECK(with({"-shell"}).shell);
  CHECK(with({"-shell=T"}).shell);
  CHECK(with({"-pass-stdin"}).pass_stdin);
  CHECK_FALSE(with({"-pass-stdin=false"}).pass_stdin);
  CHECK(with({"-child-exit-code"}).child_exit_code);
  CHECK(with({"--child-exit-code=true"}).child_exit_code);
  CHECK(with({"-preserve-status"}).preserve_status);
  CHECK(with({"-verbose"}).verbose);
  CHECK(with({"-verbose=1"}).verbose);
  CHECK_FALSE(with({"-verbose=F"}).verbose);
}

TEST_CASE("-shell false: the word after a boolean is the prefix") {
  EnvScope env;
  Options o = parse_options({"-shell", "false", "cmd"});
  CHECK(o.shell);
  CHECK(o.prefix == "false");
  CHECK(o.child == Args{"cmd"});
}

TEST_CASE("-kill-after takes a Go duration") {
  EnvScope env;
  CHECK(with({"-kill-after", "100ms"}).kill_after == 100ms);
  CHECK(with({"-kill-after=0"}).kill_after == 0ns);
  CHECK(with({"-kill-after=1m30s"}).kill_after == 90s);
}

TEST_CASE("-conflict-exit-code and -lost-exit-code: exit statuses, 0 to 255, default 1") {
  EnvScope env;
  CHECK(with({}).conflict_exit_code == 1);
  CHECK(with({}).lost_exit_code == 1);
  CHECK(with({"-conflict-exit-code", "75"}).conflict_exit_code == 75);
  CHECK(with({"-lost-exit-code=0"}).lost_exit_code == 0);
  CHECK(with({"-lost-exit-code=255"}).lost_exit_code == 255);
  CHECK(error_of({"-conflict-exit-code=256", "p", "c"}) ==
        "invalid value \"256\" for flag -conflict-exit-code: an exit status is 0 to 255");
  CHECK(error_of({"-lost-exit-code=-1", "p", "c"}) ==
        "invalid value \"-1\" for flag -lost-exit-code: an exit status is 0 to 255");
  CHECK(error_of({"-lost-exit-code=x", "p", "c"}) ==
        "invalid value \"x\" for flag -lost-exit-code: parse error");
}

TEST_CASE("-min-hold takes a Go duration, 0 by default") {
  EnvScope env;
  CHECK(with({}).min_hold == 0ns);
  CHECK(with({"-min-hold", "1m"}).min_hold == 60s);
  CHECK(error_of({"-min-hold=-1s", "p", "c"}).starts_with("-min-hold must be between 0s and "));
  // Its end, told as a date, must fit the clock: 2,000,000 h from now does, 2,100,000 h does not.
  CHECK(with({"-min-hold", "2000000h"}).min_hold == 2000000h);
  std::string past_the_clock = error_of({"-min-hold", "2100000h", "p", "c"});
  CHECK(past_the_clock.starts_with("-min-hold must be between 0s and 20"));
  CHECK(past_the_clock.ends_with(
      "h (its end must fit the clock, which ends in 2262), not 2100000h0m0s"));
}

TEST_CASE("-check takes a command, with its interval (10s) and failures in a row (3)") {
  EnvScope env;
  CHECK(with({}).check.command.empty());
  Options o =
      with({"-check", "curl -f http://127.0.0.1/", "-check-interval=2s", "-check-failures", "5"});
  CHECK(o.check.command == "curl -f http://127.0.0.1/");
  CHECK(o.check.interval == 2s);
  CHECK(o.check.failures == 5);
  CHECK(with({"-check", "true"}).check.interval == 10s);
  CHECK(with({"-check", "true"}).check.failures == 3);
  CHECK(error_of({"-check-interval", "1s", "p", "c"}) ==
        "-check-interval and -check-failures go with -check");
  CHECK(error_of({"-check-failures", "2", "p", "c"}) ==
        "-check-interval and -check-failures go with -check");
  CHECK(error_of({"-check", "", "p", "c"}) == "-check needs a command");
  CHECK(error_of({"-check", "true", "-check-interval", "99ms", "p", "c"}) ==
        "-check-interval must be at least 100ms");
  CHECK(error_of({"-check", "true", "-check-failures", "0", "p", "c"}) ==
        "-check-failures must be at least 1");
  CHECK(error_of({"-status", "-check", "true", "p"}) == "-check goes with a run, not -status");
}

TEST_CASE("-metrics-file names a file, for a run only") {
  EnvScope env;
  CHECK(with({}).metrics_file.empty());
  CHECK(with({"-metrics-file", "/var/lib/node-exporter/job.prom"}).metrics_file ==
        "/var/lib/node-exporter/job.prom");
  CHECK(error_of({"-metrics-file=", "p", "c"}) == "-metrics-file needs a file name");
  CHECK(error_of({"-status", "-metrics-file=x.prom", "p"}) ==
        "-metrics-file goes with a run, not -status");
}

TEST_CASE("-ready is hold (the default) or wait; Go checks every occurrence") {
  EnvScope env;
  CHECK_FALSE(with({}).ready_when_queued);
  CHECK_FALSE(with({"-ready=hold"}).ready_when_queued);
  CHECK(with({"-ready", "wait"}).ready_when_queued);
  CHECK(with({"-ready=hold", "-ready=wait"}).ready_when_queued);
  CHECK(error_of({"-ready=soon", "p", "c"}) ==
        "invalid value \"soon\" for flag -ready: must be hold or wait");
  CHECK(error_of({"-ready=", "-ready=wait", "p", "c"}) ==
        "invalid value \"\" for flag -ready: must be hold or wait");
}

TEST_CASE("-backend names a backend") {
  EnvScope env;
  CHECK(with({"-backend", "local"}).backend == "local");
  CHECK(with({"-backend=consul"}).backend == "consul");
  CHECK(with({"-backend=etcd"}).backend == "etcd");
  CHECK(with({"-backend=zookeeper"}).backend == "zookeeper");
}

TEST_CASE("-version needs no prefix and skips the other checks") {
  EnvScope env;
  CHECK(parse_options({"-version"}).version);
  CHECK(parse_options({"--version"}).version);
  CHECK(parse_options({"-version", "-n", "0"}).version);
  CHECK_FALSE(parse_options({"-version=false", "p", "cmd"}).version);
}

TEST_CASE("-h and -help ask for the usage, whatever comes after them") {
  EnvScope env;
  for (const char* h : {"-h", "-help", "--h", "--help"}) {
    CAPTURE(h);
    CHECK(parse_options({h}).help);
  }
  CHECK(parse_options({"-n", "0", "-h"}).help);
  CHECK(parse_options({"-h", "-n", "abc"}).help);
  // Flags are read in order, as Go reads them: a bad value before -help is reported.
  CHECK_THROWS_AS(parse_options({"-timeout", "1", "-help", "p"}), lk::UsageError);
  CHECK(parse_options({"-version", "-help"}).help);
  // Go's flag package answers -help with the usage even as -help=false.
  CHECK(parse_options({"-help=false"}).help);
}

TEST_CASE("usage_text lists the flags Go-style") {
  EnvScope env;
  // Building every flag also checks each against the table a parse builds from (its kind).
  std::string usage;
  REQUIRE_NOTHROW(usage = lk::usage_text());
  CHECK(usage.find("Usage: lock [options] prefix child...") != std::string::npos);
  for (const char* flag :
       {"-n", "-name", "-monitor-retry", "-timeout", "-shell", "-pass-stdin", "-child-exit-code",
        "-preserve-status", "-kill-after", "-verbose", "-backend", "-state-dir", "-version",
        "-http-addr", "-token", "-datacenter", "-stale"}) {
    CAPTURE(flag);
    CHECK(usage.find(std::string(" ") + flag) != std::string::npos);
  }
  CHECK(usage.find("--") == std::string::npos);
  CHECK(usage.find("consul-http-ssl") == std::string::npos);
}

TEST_CASE("a repeated flag: the last one wins") {
  EnvScope env;
  CHECK(with({"-n", "2", "-n", "3"}).limit == 3);
  CHECK(with({"-n", "3", "-n=2"}).limit == 2);
  CHECK(with({"-name", "a", "-name", "b"}).name == "b");
  CHECK(with({"-shell=false", "-shell"}).shell);
  CHECK_FALSE(with({"-shell", "-shell=false"}).shell);
  CHECK(with({"-timeout", "1s", "-timeout", "2s"}).timeout == 2s);
  CHECK(with({"-kill-after", "1s", "-kill-after", "2s"}).kill_after == 2s);
  CHECK(with({"-monitor-retry", "5", "-monitor-retry", "1"}).monitor_retry == 1);
  CHECK(with({"-backend", "consul", "-backend", "local"}).backend == "local");
}

TEST_CASE("the child's words are passed on untouched") {
  EnvScope env;
  Options o = parse_options(
      {"-verbose", "p", "-n", "5", "--", "-bogus", "a  b", "", "-", "---x", "-timeout"});
  CHECK(o.prefix == "p");
  CHECK(o.child == Args{"-n", "5", "--", "-bogus", "a  b", "", "-", "---x", "-timeout"});
  CHECK(o.limit == 1);
  CHECK(o.verbose);
}

TEST_CASE("'--' ends the options, so the prefix may start with '-'") {
  EnvScope env;
  Options o = parse_options({"-n", "2", "--", "-p", "cmd"});
  CHECK(o.limit == 2);
  CHECK(o.prefix == "-p");
  CHECK(o.child == Args{"cmd"});
}

TEST_CASE("a '--' right after the prefix separates it from the child, as with flock(1)") {
  EnvScope env;
  Options o = parse_options({"-pass-stdin", "p", "--", "bash", "--", "x"});
  CHECK(o.prefix == "p");
  CHECK(o.child == Args{"bash", "--", "x"});
  CHECK(error_of({"p", "--"}) == "Key prefix and child command must be specified");
}

TEST_CASE("the prefix is validated and cleaned") {
  EnvScope env;
  CHECK(parse_options({"a/b/", "cmd"}).prefix == "a/b");
  CHECK(error_of({"/a", "cmd"}) == "prefix '/a' must be relative (no leading '/')");
  CHECK(error_of({"a/../b", "cmd"}) == "prefix 'a/../b' must not contain '.' or '..' components");
  CHECK(error_of({"a//b", "cmd"}) == "prefix 'a//b' must not contain empty components");
  CHECK(error_of({"", "cmd"}) == "the prefix must not be empty");
  CHECK(error_of({"a\tb", "cmd"}) == "prefix 'a\\tb' contains a control character");
}

TEST_CASE("LOCK_BACKEND gives the default backend; -backend overrides it") {
  EnvScope env;
  env.set("LOCK_BACKEND", "consul");
  CHECK(with({}).backend == "consul");
  CHECK(with({"-backend", "local"}).backend == "local");
  env.set("LOCK_BACKEND", "nonsense");
  CHECK(error_of({"p", "cmd"}) ==
        "unknown backend 'nonsense' (choose local, consul, etcd, zookeeper, postgres or memory)");
}

TEST_CASE("an empty LOCK_BACKEND counts as unset") {
  EnvScope env;
  env.set("LOCK_BACKEND", "");
  CHECK(with({}).backend == "local");
}

TEST_CASE("an unknown backend is refused") {
  EnvScope env;
  CHECK(error_of({"-backend", "x", "p", "cmd"}) ==
        "unknown backend 'x' (choose local, consul, etcd, zookeeper, postgres or memory)");
  CHECK(error_of({"-backend", "Local", "p", "cmd"}) ==
        "unknown backend 'Local' (choose local, consul, etcd, zookeeper, postgres or memory)");
}

TEST_CASE("limits and counts are checked with consul's wording") {
  EnvScope env;
  CHECK(error_of({"-n", "0", "p", "cmd"}) == "Lock holder limit must be positive");
  CHECK(error_of({"-n", "-1", "p", "cmd"}) == "Lock holder limit must be positive");
  CHECK(error_of({"-n=-2147483648", "p", "cmd"}) == "Lock holder limit must be positive");
  CHECK(error_of({"-monitor-retry", "-1", "p", "cmd"}) ==
        "Number for 'monitor-retry' must be >= 0");
  CHECK(error_of({"-timeout", "-1s", "p", "cmd"}) == "Timeout must be positive");
  CHECK(error_of({"-timeout", "-1ns", "p", "cmd"}) == "Timeout must be positive");
  CHECK(error_of({"-kill-after", "-1s", "p", "cmd"}) == "-kill-after must not be negative");
}

TEST_CASE("a prefix and a child are both required") {
  EnvScope env;
  CHECK(error_of({}) == "Key prefix and child command must be specified");
  CHECK(error_of({"p"}) == "Key prefix and child command must be specified");
  CHECK(error_of({"-verbose", "p"}) == "Key prefix and child command must be specified");
  CHECK(error_of({"--", "p"}) == "Key prefix and child command must be specified");
}

TEST_CASE("the checks come in consul's order") {
  EnvScope env;
  // consul checks the limit before the arguments, and both before the timeout.
  CHECK(error_of({"-n", "0"}) == "Lock holder limit must be positive");
  CHECK(error_of({"-timeout", "-1s"}) == "Key prefix and child command must be specified");
  CHECK(error_of({"-timeout", "-1s", "-monitor-retry", "-1", "p", "c"}) ==
        "Timeout must be positive");
  // A flag that does not parse is reported before any of them.
  CHECK(error_of({"-n", "0", "-timeout", "x"}) ==
        "invalid value \"x\" for flag -timeout: time: invalid duration \"x\"");
}

TEST_CASE("values that do not parse are refused in Go's words") {
  EnvScope env;
  CHECK(error_of({"-n", "abc", "p", "cmd"}) == "invalid value \"abc\" for flag -n: parse error");
  CHECK(error_of({"-n", "1.5", "p", "cmd"}) == "invalid value \"1.5\" for flag -n: parse error");
  CHECK(error_of({"-n", "2x", "p", "cmd"}) == "invalid value \"2x\" for flag -n: parse error");
  CHECK(error_of({"-n", " 2", "p", "cmd"}) == "invalid value \" 2\" for flag -n: parse error");
  CHECK(error_of({"-n", "99999999999999999999", "p", "cmd"}) ==
        "invalid value \"99999999999999999999\" for flag -n: value out of range");
  CHECK(error_of({"-monitor-retry", "x", "p", "cmd"}) ==
        "invalid value \"x\" for flag -monitor-retry: parse error");
  CHECK(error_of({"-timeout", "1", "p", "cmd"}) ==
        "invalid value \"1\" for flag -timeout: time: missing unit in duration \"1\"");
  CHECK(error_of({"-kill-after", "soon", "p", "cmd"}) ==
        "invalid value \"soon\" for flag -kill-after: time: invalid duration \"soon\"");
  CHECK(error_of({"-shell=maybe", "p", "cmd"}) ==
        "invalid boolean value \"maybe\" for -shell: parse error");
  CHECK(error_of({"-bogus", "p", "cmd"}) == "flag provided but not defined: -bogus");
  CHECK(error_of({"-timeout"}) == "flag needs an argument: -timeout");
  CHECK(error_of({"---x", "p", "cmd"}) == "bad flag syntax: ---x");
}

TEST_CASE("every error is a UsageError") {
  EnvScope env;
  CHECK_THROWS_AS(parse_options({"-n", "0", "p", "c"}), lk::UsageError);
  CHECK_THROWS_AS(parse_options({"-bogus"}), lk::UsageError);
  CHECK_THROWS_AS(parse_options({"/abs", "c"}), lk::UsageError);
  CHECK_THROWS_AS(parse_options({"-backend", "x", "p", "c"}), lk::UsageError);
}

// Go reads -n and -monitor-retry with strconv.ParseInt(s, 0, 64): a sign, a base prefix and
// underscores are all accepted.
TEST_CASE("integers are read as Go's flag package reads them") {
  EnvScope env;
  CHECK(error_of({"-n", "+2", "p", "cmd"}) == "");
  CHECK(error_of({"-n", "0x10", "p", "cmd"}) == "");
  if (error_of({"-n", "0x10", "p", "cmd"}).empty()) CHECK(with({"-n", "0x10"}).limit == 16);
  if (error_of({"-n", "010", "p", "cmd"}).empty()) CHECK(with({"-n", "010"}).limit == 8);
  if (error_of({"-n", "1_000", "p", "cmd"}).empty()) CHECK(with({"-n", "1_000"}).limit == 1000);
  CHECK(error_of({"-n", "0b11", "p", "cmd"}) == "");
}

// Go sets each flag as it reads it, so a bad value is an error even when a later repeat of the
// flag is good.
TEST_CASE("a bad value is refused even when the flag is repeated") {
  EnvScope env;
  CHECK(error_of({"-n", "abc", "-n", "2", "p", "cmd"}) ==
        "invalid value \"abc\" for flag -n: parse error");
  CHECK(error_of({"-timeout", "x", "-timeout", "1s", "p", "cmd"}) ==
        "invalid value \"x\" for flag -timeout: time: invalid duration \"x\"");
}

// Go gives an empty value to a string flag like any other, and reports an empty number or
// duration as a value that does not parse.
TEST_CASE("an empty value is read as Go reads it") {
  EnvScope env;
  CHECK(error_of({"-name=", "p", "cmd"}) == "");
  if (error_of({"-name=", "p", "cmd"}).empty())
    CHECK(with({"-name="}).name == "lock for 'cmd' at 'p'");
  CHECK(error_of({"-name", "", "p", "cmd"}) == "");
  CHECK(error_of({"-backend", "consul", "-http-addr=", "p", "cmd"}) == "");
  CHECK(error_of({"-backend", "consul", "-token", "", "p", "cmd"}) == "");
  CHECK(error_of({"-n", "", "p", "cmd"}) == "invalid value \"\" for flag -n: parse error");
  CHECK(error_of({"-monitor-retry=", "p", "cmd"}) ==
        "invalid value \"\" for flag -monitor-retry: parse error");
  CHECK(error_of({"-timeout=", "p", "cmd"}) ==
        "invalid value \"\" for flag -timeout: time: invalid duration \"\"");
  CHECK(error_of({"-kill-after", "", "p", "cmd"}) ==
        "invalid value \"\" for flag -kill-after: time: invalid duration \"\"");
}

// Consul's API client ignores an empty CONSUL_HTTP_ADDR, as scripts that `export
// CONSUL_HTTP_ADDR=` expect.
// consul registers -try as a flag of its own, so Go names it in the message.
TEST_CASE("a bad -try value is reported under -try") {
  EnvScope env;
  CHECK(error_of({"-try", "1", "p", "cmd"}) ==
        "invalid value \"1\" for flag -try: time: missing unit in duration \"1\"");
}

// Go stops at -h, before it reads what follows.
TEST_CASE("-h wins over a later unknown flag") {
  EnvScope env;
  CHECK(error_of({"-h", "-bogus"}) == "");
}

TEST_CASE("-status takes a prefix and no child; -json goes with it") {
  EnvScope env;
  Options o = parse_options({"-status", "-json", "a/b"});
  CHECK(o.status);
  CHECK(o.json);
  CHECK(o.prefix == "a/b");
  CHECK(o.child.empty());
  CHECK(error_of({"-status", "p", "cmd"}) == "-status takes a prefix and no child");
  CHECK(error_of({"-status"}) == "-status takes a prefix and no child");
  CHECK(error_of({"-json", "p", "cmd"}) == "-json goes with -status");
}

TEST_CASE("-watch goes with -status, on every backend") {
  EnvScope env;
  Options o = parse_options({"-status", "-watch", "-json", "-timeout", "1m", "p"});
  CHECK(o.watch);
  CHECK(o.timeout == 1min);
  CHECK_FALSE(parse_options({"-status", "p"}).watch);
  CHECK(error_of({"-watch", "p", "cmd"}) == "-watch goes with -status");
  for (const char* backend : {"consul", "etcd", "zookeeper"})
    CHECK(parse_options({"-backend", backend, "-status", "-watch", "p"}).watch);
}

TEST_CASE("option_variables names each variable parse_options reads, once") {
  std::vector<std::string> names = lk::option_variables();
  for (const char* read : {"LOCK_BACKEND", "LOCK_STATE_DIR", "CONSUL_HTTP_ADDR",
                           "CONSUL_HTTP_TOKEN_FILE", "CONSUL_HTTP_SSL_VERIFY", "ETCDCTL_ENDPOINTS",
                           "ETCDCTL_CACERT", "ETCDCTL_PASSWORD", "ZOOKEEPER_ENDPOINTS"})
    CHECK_MESSAGE(std::count(names.begin(), names.end(), read) == 1, read);
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
}
