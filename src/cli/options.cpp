#include "cli/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <stdexcept>

#include "backend/prefix.hpp"
#include "cli/duration.hpp"
#include "cli/go_flags.hpp"
#include "util/error.hpp"

namespace lk {
namespace {

const char* const kDescription = R"(Usage: lock [options] prefix child...

  Acquires a lock or semaphore at the given prefix and runs the child while
  holding it. The child starts only once the lock is held; it runs in its own
  process group with CONSUL_LOCK_HELD=true and the fencing token in
  LOCK_FENCING_TOKEN. If the lock is lost, the child's process group gets
  SIGTERM; if lock is interrupted, the signal is passed on. Whatever is left of
  the child's processes after -kill-after gets SIGKILL.

  When -n=1, a single holder provides mutual exclusion. A higher value makes a
  semaphore with that many holders; everyone on a prefix must use the same -n.

  The default backend keeps file locks on this machine and needs no server.
  Options are Go-style: -flag, -flag=value or -flag value; the first argument
  that is not an option is the prefix, and everything after it is the child's.)";

// `consul lock`'s API flags: any of them alone selects the consul backend, as it would.
const std::vector<std::string> kApiFlags = {"http-addr",   "token",      "token-file",
                                            "ca-file",     "ca-path",    "client-cert",
                                            "client-key",  "tls-server-name", "datacenter",
                                            "stale"};
// Which backends each flag that is not for all of them applies to.
const std::vector<std::pair<std::string, std::vector<std::string>>> kBackendFlags = {
    {"http-addr", {"consul"}},       {"token", {"consul"}},
    {"token-file", {"consul"}},      {"datacenter", {"consul"}},
    {"stale", {"consul"}},           {"lock-delay", {"consul"}},
    {"ca-file", {"consul", "etcd"}}, {"ca-path", {"consul", "etcd"}},
    {"client-cert", {"consul", "etcd"}}, {"client-key", {"consul", "etcd"}},
    {"tls-server-name", {"consul", "etcd"}},
    {"session-ttl", {"consul", "etcd", "zookeeper"}}, {"value", {"consul", "etcd", "zookeeper"}},
    {"endpoints", {"etcd", "zookeeper"}},
    {"state-dir", {"local"}}};

// CLI11 keeps the options' targets, the environment defaults, the conversions and the help text;
// Go's single-dash syntax is handled in go_flags before it sees anything.
std::string invalid(const std::string& flag, const std::string& text, const std::string& why) {
  return "invalid value \"" + text + "\" for flag -" + flag + ": " + why;
}

// Integers as Go's flag package reads them, with its wording when they do not parse.
int int_value(const std::string& flag, const std::string& text) {
  try {
    long long v = parse_go_int(text);
    if (v < INT_MIN || v > INT_MAX) throw std::out_of_range("value out of range");
    return static_cast<int>(v);
  } catch (const std::exception& e) {
    throw UsageError(invalid(flag, text, e.what()));
  }
}

std::chrono::nanoseconds duration_value(const std::string& flag, const std::string& text) {
  try {
    return parse_go_duration(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(invalid(flag, text, e.what()));
  }
}

// Go checks every occurrence of a flag as it comes, so an early bad value is reported even
// when a later one would win.
void check_value(const std::string& flag, const std::string& text) {
  if (flag == "n" || flag == "monitor-retry") int_value(flag, text);
  if (flag == "timeout" || flag == "try" || flag == "kill-after" || flag == "session-ttl" ||
      flag == "lock-delay")
    duration_value(flag, text);
  if (flag == "ready" && text != "hold" && text != "wait")
    throw UsageError(invalid(flag, text, "must be hold or wait"));
}

class GoStyleFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool) const override {
    return "-" + opt->get_lnames().front();
  }
  std::string make_option_opts(const CLI::Option* opt) const override {
    return opt->get_option_text();
  }
  std::string make_usage(const CLI::App*, std::string) const override { return ""; }
};

// Every flag: its name, whether it takes a value, and the environment variable that stands in
// for it. Building a CLI11 option compares it with every option built before, so building all of
// them cost a tenth of an uncontended run; a parse builds only the flags given and those whose
// variable is set (Cli's `wanted`), and -help builds them all, checked against this list.
struct FlagInfo {
  std::string_view name;
  FlagKind kind;
  const char* env = nullptr;
};
constexpr FlagKind kBool = FlagKind::boolean, kValue = FlagKind::value;
constexpr FlagInfo kFlags[] = {
    {"n", kValue}, {"name", kValue}, {"monitor-retry", kValue}, {"timeout", kValue},
    {"shell", kBool}, {"pass-stdin", kBool}, {"child-exit-code", kBool},
    {"preserve-status", kBool}, {"kill-after", kValue}, {"verbose", kBool}, {"ready", kValue},
    {"backend", kValue, "LOCK_BACKEND"}, {"state-dir", kValue, "LOCK_STATE_DIR"},
    {"status", kBool}, {"json", kBool}, {"version", kBool},
    {"http-addr", kValue, "CONSUL_HTTP_ADDR"}, {"token", kValue, "CONSUL_HTTP_TOKEN"},
    {"token-file", kValue, "CONSUL_HTTP_TOKEN_FILE"}, {"ca-file", kValue, "CONSUL_CACERT"},
    {"ca-path", kValue, "CONSUL_CAPATH"}, {"client-cert", kValue, "CONSUL_CLIENT_CERT"},
    {"client-key", kValue, "CONSUL_CLIENT_KEY"},
    {"tls-server-name", kValue, "CONSUL_TLS_SERVER_NAME"}, {"datacenter", kValue},
    {"stale", kBool}, {"session-ttl", kValue}, {"lock-delay", kValue}, {"value", kValue},
    {"endpoints", kValue, "ETCDCTL_ENDPOINTS"},
    // Read from the environment only, like Consul does.
    {"consul-http-ssl", kValue, "CONSUL_HTTP_SSL"},
    {"consul-http-ssl-verify", kValue, "CONSUL_HTTP_SSL_VERIFY"}};

const FlagInfo* flag_info(std::string_view name) {
  for (const FlagInfo& f : kFlags)
    if (f.name == name) return &f;
  return nullptr;
}

std::optional<FlagKind> kind_of(std::string_view name) {
  if (name == "h" || name == "help") return FlagKind::boolean;
  if (name == "try") return FlagKind::value;
  if (name.starts_with("consul-")) return std::nullopt;
  const FlagInfo* f = flag_info(name);
  if (!f) return std::nullopt;
  return f->kind;
}

struct Cli {
  Options o;
  std::string timeout_text, kill_after_text, ready_text, ssl_text, ssl_verify_text, session_ttl_text,
      lock_delay_text, endpoints_text;
  CLI::App app{kDescription, "lock"};
  std::function<bool(const FlagInfo&)> wanted;

  // Builds the flags `wanted` picks out of kFlags, or all of them.
  explicit Cli(std::function<bool(const FlagInfo&)> which = nullptr) : wanted(std::move(which)) {
    app.formatter(std::make_shared<GoStyleFormatter>());
    app.get_formatter()->column_width(30);
    app.set_help_flag();  // -h and -help are Go's, handled in parse_options
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

    int_flag("n", o.limit, "Limit of lock holders; above 1 the lock is a semaphore");
    if (want("name"))
      app.add_option("--name", o.name, "Name of the session (default: from the child command)")
          ->option_text("=<string>");
    int_flag("monitor-retry", o.monitor_retry,
             "Attempts, at most 1s apart, a failed lease renewal is sure to get before the child is "
             "stopped (default 3)");
    if (want("timeout"))
      app.add_option("--timeout", timeout_text,
                     "Maximum time to wait for the lock, e.g. 500ms or 2m; 0 waits forever "
                     "(-try is the same)")
          ->option_text("=<duration>");
    if (want("shell")) app.add_flag("--shell", o.shell, "Run the child with $SHELL -c (default true)");
    if (want("pass-stdin")) app.add_flag("--pass-stdin", o.pass_stdin, "Give the child our stdin (else /dev/null)");
    if (want("child-exit-code"))
      app.add_flag("--child-exit-code", o.child_exit_code, "Exit 2 if the child exited with an error");
    if (want("preserve-status"))
      app.add_flag("--preserve-status", o.preserve_status,
                   "Exit with the child's own status (128+N if killed by signal N)");
    if (want("kill-after"))
      app.add_option("--kill-after", kill_after_text,
                     "Time between SIGTERM and SIGKILL when stopping the child (default 5s)")
          ->option_text("=<duration>");
    if (want("verbose")) app.add_flag("--verbose", o.verbose, "Say what lock is doing, on stderr");
    if (want("ready"))
      app.add_option("--ready", ready_text,
                     "Under systemd (Type=notify), report the unit ready once the child runs (hold, "
                     "the default) or once in line for the lock (wait)")
          ->option_text("=<when>");
    if (want("backend"))
      app.add_option("--backend", o.backend, "local (default), consul, etcd or zookeeper")
          ->option_text("=<name>");
    if (want("state-dir"))
      app.add_option("--state-dir", o.state_dir,
                     "Directory of the local backend's lock files (default /run/lock/lock, "
                     "/run/lock/lock-<uid> or /tmp/lock-<uid>)")
          ->option_text("=<path>");
    if (want("status"))
      app.add_flag("--status", o.status,
                   "Show who holds the prefix and who waits, and exit (0 held, 3 not held)");
    if (want("json")) app.add_flag("--json", o.json, "With -status, print JSON");
    if (want("version")) app.add_flag("--version", o.version, "Print the version and exit");

    auto api = [&](const char* name, std::string& var, const char* help) {
      if (want(name))
        app.add_option(std::string("--") + name, var, help)->option_text("=<value>")->group("API Options");
    };
    api("http-addr", o.api.http_addr,
        "Address of the Consul agent: host:port, http(s)://host:port or unix:///path");
    api("token", o.api.token, "ACL token to use in the request");
    api("token-file", o.api.token_file, "File containing the ACL token");
    api("ca-file", o.api.ca_file, "CA file for TLS");
    api("ca-path", o.api.ca_path, "Directory of CA certificates for TLS");
    api("client-cert", o.api.client_cert, "Client certificate for TLS");
    api("client-key", o.api.client_key, "Client key for TLS");
    api("tls-server-name", o.api.tls_server_name, "Server name to use as the SNI host for TLS");
    api("datacenter", o.api.datacenter, "Datacenter to query (default: the agent's)");
    if (want("stale")) app.add_flag("--stale", o.api.stale, "Let any Consul server answer reads")->group("API Options");
    if (want("session-ttl"))
      app.add_option("--session-ttl", session_ttl_text,
                     "TTL of the session or lease (consul: 10s to 24h, default 15s; etcd: whole "
                     "seconds, default 10s)")
          ->option_text("=<duration>")
          ->group("Network Options");
    if (want("lock-delay"))
      app.add_option("--lock-delay", lock_delay_text,
                     "Consul's lock-delay after the session is invalidated (0 to 60s, default 15s)")
          ->option_text("=<duration>")
          ->group("Network Options");
    if (want("value"))
      app.add_option_function<std::string>(
             "--value", [this](const std::string& v) { o.value = v; },
             "Value stored with the hold (default: a JSON record of host, pid and name)")
          ->option_text("=<string>")
          ->group("Network Options");
    if (want("endpoints"))
      app.add_option("--endpoints", endpoints_text,
                     "etcd endpoints, comma-separated URLs (default http://127.0.0.1:2379); for "
                     "ZooKeeper, host:port[,host:port...][/chroot] (default 127.0.0.1:2181)")
          ->option_text("=<urls>")
          ->group("Network Options");
    if (want("consul-http-ssl")) app.add_option("--consul-http-ssl", ssl_text)->group("");
    if (want("consul-http-ssl-verify")) app.add_option("--consul-http-ssl-verify", ssl_verify_text)->group("");

    // What was built takes its variable from kFlags. With every flag built, each is also checked
    // against kFlags: its kind, and that no entry there is left undefined.
    auto built = app.get_options();
    for (CLI::Option* opt : built) {
      const std::string& name = opt->get_lnames().front();
      // want() checked the name it was asked about, not the one then defined.
      const FlagInfo* f = flag_info(name);
      if (!f) throw std::logic_error("flag -" + name + " is defined but not in kFlags");
      if (!wanted && (opt->get_expected_min() == 0) != (f->kind == FlagKind::boolean))
        throw std::logic_error("flag -" + name + " is not of the kind kFlags says");
      if (f->env) opt->envname(f->env);
    }
    if (!wanted && built.size() != std::size(kFlags)) throw std::logic_error("a flag in kFlags is not defined");
  }

  bool want(std::string_view name) const {
    const FlagInfo* f = flag_info(name);
    if (!f) throw std::logic_error("flag -" + std::string(name) + " is missing from kFlags");
    return !wanted || wanted(*f);
  }

  void int_flag(const std::string& name, int& var, const std::string& help) {
    if (!want(name)) return;
    app.add_option_function<std::string>(
           "--" + name, [name, &var](const std::string& text) { var = int_value(name, text); },
           help)
        ->option_text("=<int>");
  }
};

bool env_bool(const char* env, const std::string& text, bool fallback) {
  if (text.empty()) return fallback;
  auto b = parse_go_bool(text);
  if (!b) throw UsageError(std::string("invalid value \"") + text + "\" for " + env + ": parse error");
  return *b;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

void choose_backend(Options& o, const std::vector<std::string>& given) {
  auto was_given = [&](const std::string& f) {
    return std::find(given.begin(), given.end(), f) != given.end();
  };
  const char* consul_addr = std::getenv("CONSUL_HTTP_ADDR");
  if (!o.backend.empty()) {
    o.backend_chosen_by = was_given("backend") ? "-backend " + o.backend : "LOCK_BACKEND=" + o.backend;
  } else if (!o.api_flags_given.empty()) {
    o.backend = "consul";
    o.backend_chosen_by = o.api_flags_given.front() + " selects it";
  } else if (was_given("endpoints")) {
    o.backend = "etcd";
    o.backend_chosen_by = "-endpoints selects it";
  } else if (consul_addr && *consul_addr) {
    o.backend = "consul";
    o.backend_chosen_by = "CONSUL_HTTP_ADDR is set";
  } else {
    o.backend = "local";
  }
  static const std::vector<std::string> known = {"local", "consul", "etcd", "zookeeper"};
  if (std::find(known.begin(), known.end(), o.backend) == known.end())
    throw UsageError("unknown backend '" + o.backend +
                     "' (choose local, consul, etcd or zookeeper)");
  for (const auto& [flag, backends] : kBackendFlags) {
    if (!was_given(flag) || std::find(backends.begin(), backends.end(), o.backend) != backends.end())
      continue;
    std::string which = backends.front();
    for (std::size_t i = 1; i < backends.size(); ++i) which += (i + 1 == backends.size() ? " and " : ", ") + backends[i];
    throw UsageError("-" + flag + " applies to the " + which + " backend" +
                     (backends.size() > 1 ? "s" : "") + ", not to -backend " + o.backend);
  }
  // An empty value would otherwise mean the default, silently: a typo'd variable in a script.
  if (was_given("state-dir") && o.state_dir.empty())
    throw UsageError("-state-dir must not be empty (leave it out for the default)");

  if (o.backend == "etcd") {
    // etcdctl's own variables stand in for Consul's where no flag is given.
    auto etcd_env = [&](const char* flag, std::string& var, const char* env) {
      if (!was_given(flag)) var = env ? env_or_empty(env) : "";
    };
    etcd_env("ca-file", o.api.ca_file, "ETCDCTL_CACERT");
    etcd_env("client-cert", o.api.client_cert, "ETCDCTL_CERT");
    etcd_env("client-key", o.api.client_key, "ETCDCTL_KEY");
    etcd_env("ca-path", o.api.ca_path, nullptr);
    etcd_env("tls-server-name", o.api.tls_server_name, nullptr);
    std::string user = env_or_empty("ETCDCTL_USER");
    auto colon = user.find(':');
    o.etcd_user = user.substr(0, colon);
    o.etcd_password = colon == std::string::npos ? env_or_empty("ETCDCTL_PASSWORD") : user.substr(colon + 1);
    if (o.endpoints.empty()) o.endpoints = {"http://127.0.0.1:2379"};
    if (o.session_ttl.count() == 0) o.session_ttl = std::chrono::seconds(10);
    if (o.session_ttl < std::chrono::seconds(1) || o.session_ttl % std::chrono::seconds(1) != o.session_ttl.zero())
      throw UsageError("-session-ttl for etcd must be a whole number of seconds, at least 1s");
  }
  if (o.backend == "zookeeper") {
    using namespace std::chrono_literals;
    // The flag's own variable is etcdctl's, whose URLs mean nothing to ZooKeeper.
    if (!was_given("endpoints")) o.zookeeper = env_or_empty("ZOOKEEPER_ENDPOINTS");
    if (o.zookeeper.empty()) o.zookeeper = "127.0.0.1:2181";
    o.endpoints.clear();
    if (o.session_ttl.count() == 0) o.session_ttl = 10s;
    // The server clamps what it grants (2 to 20 ticks); the C client takes whole milliseconds.
    if (o.session_ttl < 1ms || o.session_ttl > std::chrono::milliseconds(INT_MAX))
      throw UsageError("-session-ttl for ZooKeeper must be between 1ms and 596h");
  }
  if (o.backend == "consul") {
    using namespace std::chrono_literals;
    if (o.session_ttl.count() == 0) o.session_ttl = 15s;
    // Consul's own bounds and wording.
    if (o.session_ttl < 10s || o.session_ttl > 24h)
      throw UsageError("Invalid Session TTL '" + format_go_duration(o.session_ttl) +
                       "', must be between [10s=24h0m0s]");
    if (o.lock_delay < 0s || o.lock_delay > 60s)
      throw UsageError("-lock-delay must be between 0s and 60s, not " + format_go_duration(o.lock_delay));
  }
}

}  // namespace

Options parse_options(const std::vector<std::string>& args) {
  GoArgs go = split_go_flags(args, kind_of);

  std::vector<std::string> args_for_cli11, given;
  for (const auto& [name, value] : go.flags) {
    if (name == "h" || name == "help") {
      Options o;
      o.help = true;
      return o;
    }
    check_value(name, value);
    std::string canonical = name == "try" ? "timeout" : name;
    given.push_back(canonical);
    // CLI11 reads "--x=" as a missing value, Go as an empty one; "--x" "" is CLI11's empty value.
    if (value.empty()) {
      args_for_cli11.push_back("--" + canonical);
      args_for_cli11.push_back("");
    } else {
      args_for_cli11.push_back("--" + canonical + "=" + value);
    }
  }
  std::vector<std::string> reversed(args_for_cli11.rbegin(), args_for_cli11.rend());
  Cli cli([&](const FlagInfo& f) {
    return std::find(given.begin(), given.end(), f.name) != given.end() || (f.env && std::getenv(f.env));
  });
  for (const auto& flag : given)
    if (std::find(kApiFlags.begin(), kApiFlags.end(), flag) != kApiFlags.end())
      cli.o.api_flags_given.push_back("-" + flag);
  try {
    cli.app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    for (std::size_t at; (at = msg.find("--")) != std::string::npos;) msg.erase(at, 1);
    throw UsageError(msg);
  }
  Options& o = cli.o;
  if (o.version) return o;

  if (!cli.timeout_text.empty()) o.timeout = duration_value("timeout", cli.timeout_text);
  if (!cli.kill_after_text.empty()) o.kill_after = duration_value("kill-after", cli.kill_after_text);
  o.ready_when_queued = cli.ready_text == "wait";
  o.api.ssl = env_bool("CONSUL_HTTP_SSL", cli.ssl_text, false);
  o.api.ssl_verify = env_bool("CONSUL_HTTP_SSL_VERIFY", cli.ssl_verify_text, true);
  if (!cli.session_ttl_text.empty()) {
    o.session_ttl = duration_value("session-ttl", cli.session_ttl_text);
    if (o.session_ttl.count() <= 0) throw UsageError("-session-ttl must be positive");
  }
  if (!cli.lock_delay_text.empty()) o.lock_delay = duration_value("lock-delay", cli.lock_delay_text);
  for (std::size_t start = 0; start <= cli.endpoints_text.size() && !cli.endpoints_text.empty();) {
    auto comma = std::min(cli.endpoints_text.find(',', start), cli.endpoints_text.size());
    std::string url = cli.endpoints_text.substr(start, comma - start);
    if (!url.empty()) o.endpoints.push_back(url.find("://") == std::string::npos ? "http://" + url : url);
    start = comma + 1;
  }

  // `lock p -- cmd`, as flock(1) users write it: a child cannot be named "--".
  if (go.rest.size() > 1 && go.rest[1] == "--") go.rest.erase(go.rest.begin() + 1);

  // Consul's own wording where `consul lock` has one.
  if (o.limit <= 0) throw UsageError("Lock holder limit must be positive");
  if (o.status && go.rest.size() != 1) throw UsageError("-status takes a prefix and no child");
  if (!o.status && go.rest.size() < 2)
    throw UsageError("Key prefix and child command must be specified");
  if (o.json && !o.status) throw UsageError("-json goes with -status");
  if (o.timeout.count() < 0) throw UsageError("Timeout must be positive");
  if (o.monitor_retry < 0) throw UsageError("Number for 'monitor-retry' must be >= 0");
  if (o.kill_after.count() < 0) throw UsageError("-kill-after must not be negative");

  o.prefix = validate_prefix(go.rest[0]);
  o.child.assign(go.rest.begin() + 1, go.rest.end());
  if (o.name.empty()) {
    std::string joined;
    for (const auto& word : o.child) joined += (joined.empty() ? "" : " ") + word;
    o.name = "lock for '" + joined + "' at '" + o.prefix + "'";
  }
  o.zookeeper = cli.endpoints_text;
  choose_backend(o, given);
  return o;
}

std::string usage_text() {
  Cli cli;
  return cli.app.help();
}

}  // namespace lk
