#include "cli/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <stdexcept>

#include "backend/backends.hpp"
#include "backend/prefix.hpp"
#include "util/duration.hpp"
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

// An exit status: what a shell can tell apart, 0 to 255.
int status_value(const std::string& flag, const std::string& text) {
  int v = int_value(flag, text);
  if (v < 0 || v > 255) throw UsageError(invalid(flag, text, "an exit status is 0 to 255"));
  return v;
}

std::chrono::nanoseconds duration_value(const std::string& flag, const std::string& text) {
  try {
    return parse_go_duration(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(invalid(flag, text, e.what()));
  }
}

bool env_bool(const char* env, const std::string& text, bool fallback) {
  if (text.empty()) return fallback;
  auto b = parse_go_bool(text);
  if (!b) throw UsageError(std::string("invalid value \"") + text + "\" for " + env + ": parse error");
  return *b;
}

std::vector<std::string> endpoint_urls(const std::string& text) {
  std::vector<std::string> urls;
  for (std::size_t start = 0; start <= text.size() && !text.empty();) {
    auto comma = std::min(text.find(',', start), text.size());
    std::string url = text.substr(start, comma - start);
    if (!url.empty()) urls.push_back(url.find("://") == std::string::npos ? "http://" + url : url);
    start = comma + 1;
  }
  return urls;
}

// What a flag's value is: how Go checks each occurrence of it as it comes (so that an early bad
// value is reported even when a later one would win), and what -help calls it.
enum class Value { none, integer, duration, text, when, name, path, api, urls };

const char* value_text(Value v) {
  switch (v) {
    case Value::integer: return "=<int>";
    case Value::duration: return "=<duration>";
    case Value::when: return "=<when>";
    case Value::name: return "=<name>";
    case Value::path: return "=<path>";
    case Value::api: return "=<value>";
    case Value::urls: return "=<urls>";
    default: return "=<string>";
  }
}

// Every flag, in the order -help lists them: its name, the variable that stands in for it, what
// its value is, its help (none: read from the environment only), its group in -help, and where
// it goes: `on` for a boolean, `set` for a value. Which backends it applies to, and which it
// selects, each backend says (backends.hpp).
struct FlagInfo {
  std::string_view name;
  const char* env = nullptr;
  Value value = Value::none;
  const char* help = nullptr;
  const char* group = nullptr;
  bool& (*on)(Options&) = nullptr;
  void (*set)(Options&, const std::string&) = nullptr;

  FlagKind kind() const { return value == Value::none ? FlagKind::boolean : FlagKind::value; }
};

constexpr const char* kApi = "API Options";
constexpr const char* kNetwork = "Network Options";

const FlagInfo kFlags[] = {
    {.name = "n", .value = Value::integer,
     .help = "Limit of lock holders; above 1 the lock is a semaphore",
     .set = [](Options& o, const std::string& t) { o.limit = int_value("n", t); }},
    {.name = "name", .value = Value::text,
     .help = "Name of the session (default: from the child command)",
     .set = [](Options& o, const std::string& t) { o.name = t; }},
    {.name = "monitor-retry", .value = Value::integer,
     .help = "Attempts, at most 1s apart, a failed lease renewal is sure to get before the child is "
             "stopped (default 3)",
     .set = [](Options& o, const std::string& t) { o.monitor_retry = int_value("monitor-retry", t); }},
    {.name = "timeout", .value = Value::duration,
     .help = "Maximum time to wait for the lock, e.g. 500ms or 2m; 0 waits forever (-try is the same)",
     .set = [](Options& o, const std::string& t) { o.timeout = duration_value("timeout", t); }},
    {.name = "shell", .help = "Run the child with $SHELL -c (default true)",
     .on = [](Options& o) -> bool& { return o.shell; }},
    {.name = "pass-stdin", .help = "Give the child our stdin (else /dev/null)",
     .on = [](Options& o) -> bool& { return o.pass_stdin; }},
    {.name = "child-exit-code", .help = "Exit 2 if the child exited with an error",
     .on = [](Options& o) -> bool& { return o.child_exit_code; }},
    {.name = "preserve-status", .help = "Exit with the child's own status (128+N if killed by signal N)",
     .on = [](Options& o) -> bool& { return o.preserve_status; }},
    {.name = "conflict-exit-code", .value = Value::integer,
     .help = "Exit status when -timeout passes without the lock (0 to 255, default 1)",
     .set = [](Options& o, const std::string& t) {
       o.conflict_exit_code = status_value("conflict-exit-code", t);
     }},
    {.name = "lost-exit-code", .value = Value::integer,
     .help = "Exit status when the lock is lost (0 to 255, default 1)",
     .set = [](Options& o, const std::string& t) { o.lost_exit_code = status_value("lost-exit-code", t); }},
    {.name = "min-hold", .value = Value::duration,
     .help = "Keep the lock at least this long from its acquisition, even when the child ends "
             "sooner, e.g. 30s (default 0)",
     .set = [](Options& o, const std::string& t) { o.min_hold = duration_value("min-hold", t); }},
    {.name = "metrics-file", .value = Value::path,
     .help = "Write the run's outcome and timings to this file, in node_exporter's textfile format, "
             "at acquisition and at exit",
     .set = [](Options& o, const std::string& t) {
       if (t.empty()) throw UsageError("-metrics-file needs a file name");
       o.metrics_file = t;
     }},
    {.name = "kill-after", .value = Value::duration,
     .help = "Time between SIGTERM and SIGKILL when stopping the child (default 5s)",
     .set = [](Options& o, const std::string& t) { o.kill_after = duration_value("kill-after", t); }},
    {.name = "verbose", .help = "Say what lock is doing, on stderr",
     .on = [](Options& o) -> bool& { return o.verbose; }},
    {.name = "ready", .value = Value::when,
     .help = "Under systemd (Type=notify), report the unit ready once the child runs (hold, the "
             "default) or once in line for the lock (wait)",
     .set = [](Options& o, const std::string& t) { o.ready_when_queued = t == "wait"; }},
    {.name = "backend", .env = "LOCK_BACKEND", .value = Value::name,
     .help = "local (default), consul, etcd or zookeeper",
     .set = [](Options& o, const std::string& t) { o.backend = t; }},
    {.name = "state-dir", .env = "LOCK_STATE_DIR", .value = Value::path,
     .help = "Directory of the local backend's lock files (default /run/lock/lock, "
             "/run/lock/lock-<uid> or /tmp/lock-<uid>)", .set = [](Options& o, const std::string& t) { o.state_dir = t; }},
    {.name = "status", .help = "Show who holds the prefix and who waits, and exit (0 held, 3 not held)",
     .on = [](Options& o) -> bool& { return o.status; }},
    {.name = "json", .help = "With -status, print JSON", .on = [](Options& o) -> bool& { return o.json; }},
    {.name = "watch", .help = "With -status, print again at every change, until SIGINT, SIGTERM or -timeout (exit 0)",
     .on = [](Options& o) -> bool& { return o.watch; }},
    {.name = "version", .help = "Print the version and exit",
     .on = [](Options& o) -> bool& { return o.version; }},
    {.name = "http-addr", .env = "CONSUL_HTTP_ADDR", .value = Value::api,
     .help = "Address of the Consul agent: host:port, http(s)://host:port or unix:///path",
     .group = kApi,
     .set = [](Options& o, const std::string& t) { o.api.http_addr = t; }},
    {.name = "token", .env = "CONSUL_HTTP_TOKEN", .value = Value::api,
     .help = "ACL token to use in the request", .group = kApi, .set = [](Options& o, const std::string& t) { o.api.token = t; }},
    {.name = "token-file", .env = "CONSUL_HTTP_TOKEN_FILE", .value = Value::api,
     .help = "File containing the ACL token", .group = kApi, .set = [](Options& o, const std::string& t) { o.api.token_file = t; }},
    {.name = "ca-file", .env = "CONSUL_CACERT", .value = Value::api, .help = "CA file for TLS",
     .group = kApi,
     .set = [](Options& o, const std::string& t) { o.api.ca_file = t; }},
    {.name = "ca-path", .env = "CONSUL_CAPATH", .value = Value::api,
     .help = "Directory of CA certificates for TLS", .group = kApi, .set = [](Options& o, const std::string& t) { o.api.ca_path = t; }},
    {.name = "client-cert", .env = "CONSUL_CLIENT_CERT", .value = Value::api,
     .help = "Client certificate for TLS", .group = kApi, .set = [](Options& o, const std::string& t) { o.api.client_cert = t; }},
    {.name = "client-key", .env = "CONSUL_CLIENT_KEY", .value = Value::api,
     .help = "Client key for TLS", .group = kApi, .set = [](Options& o, const std::string& t) { o.api.client_key = t; }},
    {.name = "tls-server-name", .env = "CONSUL_TLS_SERVER_NAME", .value = Value::api,
     .help = "Server name to use as the SNI host for TLS", .group = kApi,
     .set = [](Options& o, const std::string& t) { o.api.tls_server_name = t; }},
    {.name = "datacenter", .value = Value::api, .help = "Datacenter to query (default: the agent's)",
     .group = kApi,
     .set = [](Options& o, const std::string& t) { o.api.datacenter = t; }},
    {.name = "stale", .help = "Let any Consul server answer reads", .group = kApi,
     .on = [](Options& o) -> bool& { return o.api.stale; }},
    {.name = "session-ttl", .value = Value::duration,
     .help = "TTL of the session or lease (consul: 10s to 24h, default 15s; etcd: whole seconds, "
             "default 10s)",
     .group = kNetwork,
     .set = [](Options& o, const std::string& t) {
       o.session_ttl = duration_value("session-ttl", t);
       if (o.session_ttl.count() <= 0) throw UsageError("-session-ttl must be positive");
     }},
    {.name = "lock-delay", .value = Value::duration,
     .help = "Consul's lock-delay after the session is invalidated (0 to 60s, default 15s)",
     .group = kNetwork,
     .set = [](Options& o, const std::string& t) { o.lock_delay = duration_value("lock-delay", t); }},
    {.name = "value", .value = Value::text,
     .help = "Value stored with the hold (default: a JSON record of host, pid and name)",
     .group = kNetwork,
     .set = [](Options& o, const std::string& t) { o.value = t; }},
    {.name = "endpoints", .env = "ETCDCTL_ENDPOINTS", .value = Value::urls,
     .help = "etcd endpoints, comma-separated URLs (default http://127.0.0.1:2379); for ZooKeeper, "
             "host:port[,host:port...][/chroot] (default 127.0.0.1:2181)",
     .group = kNetwork,
     .set = [](Options& o, const std::string& t) {
       o.endpoints = endpoint_urls(t);
       o.zookeeper = t;
     }},
    // Read from the environment only, like Consul does.
    {.name = "consul-http-ssl", .env = "CONSUL_HTTP_SSL", .value = Value::text,
     .set = [](Options& o, const std::string& t) { o.api.ssl = env_bool("CONSUL_HTTP_SSL", t, false); }},
    {.name = "consul-http-ssl-verify", .env = "CONSUL_HTTP_SSL_VERIFY", .value = Value::text,
     .set = [](Options& o, const std::string& t) {
       o.api.ssl_verify = env_bool("CONSUL_HTTP_SSL_VERIFY", t, true);
     }},
};

const FlagInfo* flag_info(std::string_view name) {
  for (const FlagInfo& f : kFlags)
    if (f.name == name) return &f;
  return nullptr;
}

// Go checks every occurrence of a flag as it comes, so an early bad value is reported even
// when a later one would win.
// `name` as given (-try for -timeout).
void check_value(const FlagInfo& f, const std::string& name, const std::string& text) {
  if (f.value == Value::integer) int_value(name, text);
  if (f.value == Value::duration) duration_value(name, text);
  if (f.value == Value::when && text != "hold" && text != "wait")
    throw UsageError(invalid(name, text, "must be hold or wait"));
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

std::optional<FlagKind> kind_of(std::string_view name) {
  if (name == "h" || name == "help") return FlagKind::boolean;
  if (name == "try") return FlagKind::value;
  if (name.starts_with("consul-")) return std::nullopt;
  const FlagInfo* f = flag_info(name);
  if (!f) return std::nullopt;
  return f->kind();
}

// Building a CLI11 option compares it with every option built before, so building all of them
// cost a tenth of an uncontended run: a parse builds only the flags given and those whose
// variable is set (`wanted`), and -help builds them all.
struct Cli {
  Options o;
  CLI::App app{kDescription, "lock"};

  explicit Cli(const std::function<bool(const FlagInfo&)>& wanted = nullptr) {
    app.formatter(std::make_shared<GoStyleFormatter>());
    app.get_formatter()->column_width(30);
    app.set_help_flag();  // -h and -help are Go's, handled in parse_options
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    for (const FlagInfo& f : kFlags)
      if (!wanted || wanted(f)) add(f);
  }

  void add(const FlagInfo& f) {
    std::string name = "--" + std::string(f.name);
    CLI::Option* opt =
        f.on ? app.add_flag(name, f.on(o), f.help ? f.help : "")
             : app.add_option_function<std::string>(
                   name, [this, &f](const std::string& text) { f.set(o, text); }, f.help ? f.help : "")
                   ->option_text(value_text(f.value));
    if (!f.help) opt->group("");
    else if (f.group) opt->group(f.group);
    if (f.env) opt->envname(f.env);
  }
};

// In -backend's absence, as `consul lock` would: the first backend that a flag given selects
// (the first such flag names the reason), else one that a variable set selects, else the first.
void select_backend(Options& o, const std::vector<std::string>& given) {
  for (const BackendInfo* b : backends())
    for (const auto& flag : given)
      if (std::find(b->selecting_flags.begin(), b->selecting_flags.end(), flag) != b->selecting_flags.end()) {
        o.backend = b->name;
        o.backend_chosen_by = "-" + flag + " selects it";
        return;
      }
  for (const BackendInfo* b : backends())
    if (b->selecting_env && !env_or_empty(b->selecting_env).empty()) {
      o.backend = b->name;
      o.backend_chosen_by = std::string(b->selecting_env) + " is set";
      return;
    }
  o.backend = backends().front()->name;
}

// A flag given that is some backends' own and not the chosen one's is an error, not ignored.
void check_flags_apply(const Options& o, const Given& given) {
  for (const FlagInfo& f : kFlags) {
    if (!given(f.name)) continue;
    std::vector<std::string> owners;
    for (const BackendInfo* b : backends())
      if (std::find(b->own_flags.begin(), b->own_flags.end(), f.name) != b->own_flags.end())
        owners.emplace_back(b->name);
    if (owners.empty() || std::find(owners.begin(), owners.end(), o.backend) != owners.end()) continue;
    std::string which = owners.front();
    for (std::size_t i = 1; i < owners.size(); ++i) which += (i + 1 == owners.size() ? " and " : ", ") + owners[i];
    throw UsageError("-" + std::string(f.name) + " applies to the " + which + " backend" +
                     (owners.size() > 1 ? "s" : "") + ", not to -backend " + o.backend);
  }
}

void choose_backend(Options& o, const std::vector<std::string>& given) {
  Given was_given = [&](std::string_view f) {
    return std::find(given.begin(), given.end(), f) != given.end();
  };
  if (o.backend.empty())
    select_backend(o, given);
  else
    o.backend_chosen_by = was_given("backend") ? "-backend " + o.backend : "LOCK_BACKEND=" + o.backend;
  const BackendInfo* chosen = find_backend(o.backend);
  if (!chosen) throw UsageError("unknown backend '" + o.backend + "' (choose " + backend_names() + ")");
  check_flags_apply(o, was_given);
  chosen->configure(o, was_given);
}

// The hold's end is told as a date (-status, systemd's status): it must fit the wall clock, whose
// nanoseconds since 1970 run out in 2262. Whole hours, so that the range reads as one.
void check_min_hold(std::chrono::nanoseconds min_hold) {
  using namespace std::chrono;
  auto longest = floor<hours>(system_clock::time_point::max() - system_clock::now());
  if (min_hold < 0ns || min_hold > longest)
    throw UsageError("-min-hold must be between 0s and " + std::to_string(longest.count()) +
                     "h (its end must fit the clock, which ends in 2262), not " +
                     format_go_duration(min_hold));
}

// What one flag's value cannot tell alone: its sign, or how it goes with the others and with the
// `words` after the options (the prefix and the child). Consul's own wording where `consul lock`
// has one.
void check_together(const Options& o, std::size_t words) {
  if (o.limit <= 0) throw UsageError("Lock holder limit must be positive");
  if (o.status && words != 1) throw UsageError("-status takes a prefix and no child");
  if (!o.status && words < 2) throw UsageError("Key prefix and child command must be specified");
  if (o.json && !o.status) throw UsageError("-json goes with -status");
  if (o.watch && !o.status) throw UsageError("-watch goes with -status");
  if (o.status && !o.metrics_file.empty()) throw UsageError("-metrics-file goes with a run, not -status");
  if (o.timeout.count() < 0) throw UsageError("Timeout must be positive");
  if (o.monitor_retry < 0) throw UsageError("Number for 'monitor-retry' must be >= 0");
  if (o.kill_after.count() < 0) throw UsageError("-kill-after must not be negative");
  check_min_hold(o.min_hold);
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
    std::string canonical = name == "try" ? "timeout" : name;
    check_value(*flag_info(canonical), name, value);
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
  try {
    cli.app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    for (std::size_t at; (at = msg.find("--")) != std::string::npos;) msg.erase(at, 1);
    throw UsageError(msg);
  }
  Options& o = cli.o;
  if (o.version) return o;

  // `lock p -- cmd`, as flock(1) users write it: a child cannot be named "--".
  if (go.rest.size() > 1 && go.rest[1] == "--") go.rest.erase(go.rest.begin() + 1);
  check_together(o, go.rest.size());
  o.prefix = validate_prefix(go.rest[0]);
  o.child.assign(go.rest.begin() + 1, go.rest.end());
  if (o.name.empty()) {
    std::string joined;
    for (const auto& word : o.child) joined += (joined.empty() ? "" : " ") + word;
    o.name = "lock for '" + joined + "' at '" + o.prefix + "'";
  }
  choose_backend(o, given);
  return o;
}

std::string usage_text() {
  Cli cli;
  return cli.app.help();
}

std::vector<std::string> option_variables() {
  std::vector<std::string> names;
  auto add = [&](const char* name) {
    if (name && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  for (const FlagInfo& f : kFlags) add(f.env);
  for (const BackendInfo* b : backends()) {
    add(b->selecting_env);
    for (const char* name : b->variables) add(name);
  }
  return names;
}

}  // namespace lk
