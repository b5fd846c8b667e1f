#include "cli/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdlib>

#include "backend/local/state_dir.hpp"
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

const std::vector<std::string> kApiFlags = {"http-addr",   "token",      "token-file",
                                            "ca-file",     "ca-path",    "client-cert",
                                            "client-key",  "tls-server-name", "datacenter",
                                            "stale"};

// CLI11 keeps the flag table, the environment defaults, the conversions and the help text; Go's
// single-dash syntax is handled in go_flags before it sees anything.
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
  if (flag == "timeout" || flag == "try" || flag == "kill-after") duration_value(flag, text);
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

struct Cli {
  Options o;
  std::string timeout_text, kill_after_text, ssl_text, ssl_verify_text;
  CLI::App app{kDescription, "lock"};

  Cli() {
    app.formatter(std::make_shared<GoStyleFormatter>());
    app.get_formatter()->column_width(30);
    app.set_help_flag();  // -h and -help are Go's, handled in parse_options
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

    int_flag("n", o.limit, "Limit of lock holders; above 1 the lock is a semaphore");
    app.add_option("--name", o.name, "Name of the session (default: from the child command)")
        ->option_text("=<string>");
    int_flag("monitor-retry", o.monitor_retry,
             "Times to retry a failing server while monitoring the lock, 1s apart (default 3)");
    app.add_option("--timeout", timeout_text,
                   "Maximum time to wait for the lock, e.g. 500ms or 2m; 0 waits forever "
                   "(-try is the same)")
        ->option_text("=<duration>");
    app.add_flag("--shell", o.shell, "Run the child with $SHELL -c (default true)");
    app.add_flag("--pass-stdin", o.pass_stdin, "Give the child our stdin (else /dev/null)");
    app.add_flag("--child-exit-code", o.child_exit_code,
                 "Exit 2 if the child exited with an error");
    app.add_flag("--preserve-status", o.preserve_status,
                 "Exit with the child's own status (128+N if killed by signal N)");
    app.add_option("--kill-after", kill_after_text,
                   "Time between SIGTERM and SIGKILL when stopping the child (default 5s)")
        ->option_text("=<duration>");
    app.add_flag("--verbose", o.verbose, "Say what lock is doing, on stderr");
    app.add_option("--backend", o.backend, "local (default), consul, etcd or zookeeper")
        ->option_text("=<name>")
        ->envname("LOCK_BACKEND");
    app.add_option("--state-dir", o.state_dir,
                   "Directory of the local backend's lock files (default " +
                       default_state_dir() + ")")
        ->option_text("=<path>")
        ->envname("LOCK_STATE_DIR");
    app.add_flag("--status", o.status,
                 "Show who holds the prefix and who waits, and exit (0 held, 3 not held)");
    app.add_flag("--json", o.json, "With -status, print JSON");
    app.add_flag("--version", o.version, "Print the version and exit");

    auto api = [&](const char* name, std::string& var, const char* env, const char* help) {
      auto* opt = app.add_option(std::string("--") + name, var, help)
                      ->option_text("=<value>")
                      ->group("API Options");
      if (env) opt->envname(env);
    };
    api("http-addr", o.api.http_addr, "CONSUL_HTTP_ADDR",
        "Address of the Consul agent: host:port, http(s)://host:port or unix:///path");
    api("token", o.api.token, "CONSUL_HTTP_TOKEN", "ACL token to use in the request");
    api("token-file", o.api.token_file, "CONSUL_HTTP_TOKEN_FILE",
        "File containing the ACL token");
    api("ca-file", o.api.ca_file, "CONSUL_CACERT", "CA file for TLS");
    api("ca-path", o.api.ca_path, "CONSUL_CAPATH", "Directory of CA certificates for TLS");
    api("client-cert", o.api.client_cert, "CONSUL_CLIENT_CERT", "Client certificate for TLS");
    api("client-key", o.api.client_key, "CONSUL_CLIENT_KEY", "Client key for TLS");
    api("tls-server-name", o.api.tls_server_name, "CONSUL_TLS_SERVER_NAME",
        "Server name to use as the SNI host for TLS");
    api("datacenter", o.api.datacenter, nullptr, "Datacenter to query (default: the agent's)");
    app.add_flag("--stale", o.api.stale, "Let any Consul server answer reads")->group("API Options");
    // Read from the environment only, like Consul does.
    app.add_option("--consul-http-ssl", ssl_text)->envname("CONSUL_HTTP_SSL")->group("");
    app.add_option("--consul-http-ssl-verify", ssl_verify_text)
        ->envname("CONSUL_HTTP_SSL_VERIFY")
        ->group("");
  }

  void int_flag(const std::string& name, int& var, const std::string& help) {
    app.add_option_function<std::string>(
           "--" + name, [name, &var](const std::string& text) { var = int_value(name, text); },
           help)
        ->option_text("=<int>");
  }

  std::optional<FlagKind> kind_of(std::string_view name) const {
    if (name == "h" || name == "help") return FlagKind::boolean;
    if (name == "try") return FlagKind::value;
    if (name.starts_with("consul-")) return std::nullopt;
    const CLI::Option* opt = app.get_option_no_throw("--" + std::string(name));
    if (!opt) return std::nullopt;
    return opt->get_expected_min() == 0 ? FlagKind::boolean : FlagKind::value;
  }
};

bool env_bool(const char* env, const std::string& text, bool fallback) {
  if (text.empty()) return fallback;
  auto b = parse_go_bool(text);
  if (!b) throw UsageError(std::string("invalid value \"") + text + "\" for " + env + ": parse error");
  return *b;
}

void choose_backend(Options& o, bool backend_flag, bool state_dir_flag) {
  bool any_api_flag = !o.api_flags_given.empty();
  const char* consul_addr = std::getenv("CONSUL_HTTP_ADDR");
  if (!o.backend.empty()) {
    o.backend_chosen_by = backend_flag ? "-backend " + o.backend : "LOCK_BACKEND=" + o.backend;
  } else if (any_api_flag) {
    o.backend = "consul";
    o.backend_chosen_by = o.api_flags_given.front() + " selects it";
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
  if (o.backend != "consul" && any_api_flag)
    throw UsageError(o.api_flags_given.front() + " applies to the consul backend, not to -backend " +
                     o.backend);
  o.state_dir_is_default = o.state_dir.empty();
  if (o.backend != "local" && state_dir_flag)
    throw UsageError("-state-dir applies to the local backend, not to -backend " + o.backend);
  if (o.state_dir_is_default) o.state_dir = default_state_dir();
}

}  // namespace

Options parse_options(const std::vector<std::string>& args) {
  Cli cli;
  GoArgs go = split_go_flags(args, [&](std::string_view n) { return cli.kind_of(n); });

  std::vector<std::string> args_for_cli11;
  for (const auto& [name, value] : go.flags) {
    if (name == "h" || name == "help") {
      cli.o.help = true;
      return cli.o;
    }
    check_value(name, value);
    std::string canonical = name == "try" ? "timeout" : name;
    if (std::find(kApiFlags.begin(), kApiFlags.end(), canonical) != kApiFlags.end())
      cli.o.api_flags_given.push_back("-" + canonical);
    // CLI11 reads "--x=" as a missing value, Go as an empty one; "--x" "" is CLI11's empty value.
    if (value.empty()) {
      args_for_cli11.push_back("--" + canonical);
      args_for_cli11.push_back("");
    } else {
      args_for_cli11.push_back("--" + canonical + "=" + value);
    }
  }
  std::vector<std::string> reversed(args_for_cli11.rbegin(), args_for_cli11.rend());
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
  o.api.ssl = env_bool("CONSUL_HTTP_SSL", cli.ssl_text, false);
  o.api.ssl_verify = env_bool("CONSUL_HTTP_SSL_VERIFY", cli.ssl_verify_text, true);

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
  auto given = [&](const char* flag) {
    return std::any_of(go.flags.begin(), go.flags.end(), [&](const auto& f) { return f.first == flag; });
  };
  choose_backend(o, given("backend"), given("state-dir"));
  return o;
}

std::string usage_text() {
  Cli cli;
  return cli.app.help();
}

}  // namespace lk
