#include "cli/options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <set>
#include <stdexcept>

#include "backend/prefix.hpp"
#include "cli/go_flags.hpp"
#include "util/duration.hpp"
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

// Integers as Go's flag package reads them, with its wording when they do not parse.
int int_value(std::string_view flag, const std::string& text) {
  try {
    long long v = parse_go_int(text);
    if (v < INT_MIN || v > INT_MAX) throw std::out_of_range("value out of range");
    return static_cast<int>(v);
  } catch (const std::exception& e) {
    throw UsageError(invalid(flag, text, e.what()));
  }
}

// An exit status: what a shell can tell apart, 0 to 255.
int status_value(std::string_view flag, const std::string& text) {
  int v = int_value(flag, text);
  if (v < 0 || v > 255) throw UsageError(invalid(flag, text, "an exit status is 0 to 255"));
  return v;
}

// -metrics-file's: a file to write, so not none.
void file_name(const std::string& text) {
  if (text.empty()) throw UsageError("-metrics-file needs a file name");
}

const char* value_text(Value v) {
  switch (v) {
    case Value::boolean: return "";
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

// -backend's help: the registry's backends, the first the default.
const char* backend_help() {
  static const std::string help = [] {
    std::string names = backend_names();
    std::string first(registry().front().info.name);
    return first + " (default)" + names.substr(first.size());
  }();
  return help.c_str();
}

// The first of lock's own flags: what it waits for, runs, and how it exits.
std::vector<FlagInfo> run_rows() {
  return {
      {.name = "n",
       .value = Value::integer,
       .help = "Limit of lock holders; above 1 the lock is a semaphore"},
      {.name = "name",
       .value = Value::text,
       .help = "Name of the session (default: from the child command)"},
      {.name = "monitor-retry",
       .value = Value::integer,
       .help =
           "Attempts, at most 1s apart, a failed lease renewal is sure to get before the child is "
           "stopped (default 3)"},
      {.name = "timeout",
       .value = Value::duration,
       .help = "Maximum time to wait for the lock, e.g. 500ms or 2m; 0 waits forever (-try is the "
               "same)"},
      {.name = "shell", .help = "Run the child with $SHELL -c (default true)"},
      {.name = "pass-stdin", .help = "Give the child our stdin (else /dev/null)"},
      {.name = "child-exit-code", .help = "Exit 2 if the child exited with an error"},
      {.name = "preserve-status",
       .help = "Exit with the child's own status (128+N if killed by signal N)"},
      {.name = "conflict-exit-code",
       .value = Value::integer,
       .help = "Exit status when -timeout passes without the lock (0 to 255, default 1)",
       .check = [](const std::string& t) { status_value("conflict-exit-code", t); }},
      {.name = "lost-exit-code",
       .value = Value::integer,
       .help = "Exit status when the lock is lost (0 to 255, default 1)",
       .check = [](const std::string& t) { status_value("lost-exit-code", t); }},
      {.name = "min-hold",
       .value = Value::duration,
       .help = "Keep the lock at least this long from its acquisition, even when the child ends "
               "sooner, e.g. 30s (default 0)"},
  };
}

// The rest of them: for operators (health checks, metrics, stopping, systemd) and -status.
std::vector<FlagInfo> operator_rows() {
  return {
      {.name = "check",
       .value = Value::text,
       .help = "Run this command (with /bin/sh -c) every -check-interval while the child runs; "
               "after -check-failures failures in a row, stop the child, release the lock and "
               "exit with -lost-exit-code"},
      {.name = "check-interval",
       .value = Value::duration,
       .help = "Time between the starts of two health checks, and the most one may take "
               "(default 10s)"},
      {.name = "check-failures",
       .value = Value::integer,
       .help = "Health checks that must fail in a row to give the lock up (default 3)"},
      {.name = "metrics-file",
       .value = Value::path,
       .help =
           "Write the run's outcome and timings to this file, in node_exporter's textfile format, "
           "at acquisition and at exit",
       .check = file_name},
      {.name = "kill-after",
       .value = Value::duration,
       .help = "Time between SIGTERM and SIGKILL when stopping the child (default 5s)"},
      {.name = "verbose", .help = "Say what lock is doing, on stderr"},
      {.name = "ready",
       .value = Value::when,
       .help = "Under systemd (Type=notify), report the unit ready once the child runs (hold, the "
               "default) or once in line for the lock (wait)"},
      {.name = "backend", .env = "LOCK_BACKEND", .value = Value::name, .help = backend_help()},
      {.name = "status",
       .help = "Show who holds the prefix and who waits, and exit (0 held, 3 not held)"},
      {.name = "json", .help = "With -status, print JSON"},
      {.name = "watch",
       .help =
           "With -status, print again at every change, until SIGINT, SIGTERM or -timeout (exit 0)"},
      {.name = "version", .help = "Print the version and exit"},
  };
}

// The flags of lock itself, in the order -help lists them; the backends' rows go among them
// where their `after` says.
std::vector<FlagInfo> core_rows() {
  std::vector<FlagInfo> rows = run_rows();
  std::vector<FlagInfo> rest = operator_rows();
  rows.insert(rows.end(), rest.begin(), rest.end());
  return rows;
}

// Puts `row` right after the row named `anchor` in `table`; false while that one is not there.
bool insert_after(std::vector<const FlagInfo*>& table, std::string_view anchor,
                  const FlagInfo* row) {
  auto at = std::find_if(table.begin(), table.end(),
                         [&](const FlagInfo* f) { return f->name == anchor; });
  if (at == table.end()) return false;
  table.insert(at + 1, row);
  return true;
}

// The one table: lock's rows, then each backend's where its `after` (or the row before it in its
// list) says. A row several backends share is one row. An anchor may be another list's row, so
// the lists are gone through until every row has its place.
const std::vector<const FlagInfo*>& flag_table() {
  static const std::vector<FlagInfo> core = core_rows();
  static const std::vector<const FlagInfo*> table = [] {
    std::vector<const FlagInfo*> t;
    for (const FlagInfo& f : core) t.push_back(&f);
    std::set<const FlagInfo*> placed(t.begin(), t.end());
    for (bool progress = true; progress;) {
      progress = false;
      for (const Registered& b : registry())
        for (std::size_t i = 0; i < b.info.flags.size(); ++i) {
          const FlagInfo* row = b.info.flags[i];
          if (placed.contains(row)) continue;
          std::string_view anchor = !row->after.empty() ? row->after
                                    : i                 ? b.info.flags[i - 1]->name
                                                        : "";
          if (anchor.empty()) t.push_back(row);
          else if (!insert_after(t, anchor, row)) continue;
          placed.insert(row);
          progress = true;
        }
    }
    return t;
  }();
  return table;
}

const FlagInfo* flag_info(std::string_view name) {
  for (const FlagInfo* f : flag_table())
    if (f->name == name) return f;
  return nullptr;
}

// Go checks every occurrence of a flag as it comes, so an early bad value is reported even
// when a later one would win. `name` as given (-try for -timeout).
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

// A row without help is read from its variable only (as Consul reads CONSUL_HTTP_SSL): no flag.
std::optional<FlagKind> kind_of(std::string_view name) {
  if (name == "h" || name == "help") return FlagKind::boolean;
  if (name == "try") return FlagKind::value;
  const FlagInfo* f = flag_info(name);
  if (!f || !f->help) return std::nullopt;
  return f->value == Value::boolean ? FlagKind::boolean : FlagKind::value;
}

// CLI11 keeps the environment defaults, the last of repeated values and the help text; Go's
// single-dash syntax is handled in go_flags before it sees anything. Building a CLI11 option
// compares it with every option built before, so building all of them cost a tenth of an
// uncontended run: a parse builds only the flags given and those whose variable is set
// (`wanted`), and -help builds them all.
struct Cli {
  FlagValues values;
  CLI::App app{kDescription, "lock"};

  explicit Cli(const std::function<bool(const FlagInfo&)>& wanted = nullptr) {
    app.formatter(std::make_shared<GoStyleFormatter>());
    app.get_formatter()->column_width(30);
    app.set_help_flag();  // -h and -help are Go's, handled in parse_options
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    for (const FlagInfo* f : flag_table())
      if (!wanted || wanted(*f)) add(*f);
  }

  void add(const FlagInfo& f) {
    auto take = [this, &f](const std::string& text) {
      if (f.check) f.check(text);
      values.set(f.name, text);
    };
    CLI::Option* opt =
        app.add_option_function<std::string>("--" + std::string(f.name), take, f.help ? f.help : "")
            ->option_text(value_text(f.value));
    if (!f.help) opt->group("");
    else if (f.group) opt->group(f.group);
    if (f.env) opt->envname(f.env);
  }
};

// The core options, from the values their flags ended with; what is not given keeps Options'
// own default.
void read_core(Options& o, const FlagValues& v) {
  auto integer = [&](std::string_view flag, int& field) {
    if (const std::string* t = v.find(flag)) field = int_value(flag, *t);
  };
  integer("n", o.limit);
  integer("monitor-retry", o.monitor_retry);
  integer("conflict-exit-code", o.conflict_exit_code);
  integer("lost-exit-code", o.lost_exit_code);
  integer("check-failures", o.check.failures);
  o.check.command = v.text("check");
  o.check.interval = v.duration("check-interval", o.check.interval);
  o.name = v.text("name");
  o.timeout = v.duration("timeout", o.timeout);
  o.min_hold = v.duration("min-hold", o.min_hold);
  o.kill_after = v.duration("kill-after", o.kill_after);
  o.shell = v.boolean("shell", o.shell);
  o.pass_stdin = v.boolean("pass-stdin", o.pass_stdin);
  o.child_exit_code = v.boolean("child-exit-code", o.child_exit_code);
  o.preserve_status = v.boolean("preserve-status", o.preserve_status);
  o.verbose = v.boolean("verbose", o.verbose);
  o.status = v.boolean("status", o.status);
  o.json = v.boolean("json", o.json);
  o.watch = v.boolean("watch", o.watch);
  o.version = v.boolean("version", o.version);
  o.metrics_file = v.text("metrics-file");
  o.ready_when_queued = v.text("ready") == "wait";
  o.backend = v.text("backend");
}

// In -backend's absence, as `consul lock` would: the first backend that a flag given selects
// (the first such flag names the reason), else one that a variable set selects, else the first.
void select_backend(Options& o, const std::vector<std::string>& given) {
  for (const Registered& b : registry())
    for (const auto& flag : given)
      if (std::find(b.info.selecting_flags.begin(), b.info.selecting_flags.end(), flag) !=
          b.info.selecting_flags.end()) {
        o.backend = b.info.name;
        o.backend_chosen_by = "-" + flag + " selects it";
        return;
      }
  for (const Registered& b : registry())
    if (b.info.selecting_env && !env_or_empty(b.info.selecting_env).empty()) {
      o.backend = b.info.name;
      o.backend_chosen_by = std::string(b.info.selecting_env) + " is set";
      return;
    }
  o.backend = registry().front().info.name;
}

// A flag given that is some backends' own and not the chosen one's is an error, not ignored.
void check_flags_apply(const Options& o, const Given& given) {
  for (const FlagInfo* f : flag_table()) {
    if (!given(f->name)) continue;
    std::vector<std::string> owners;
    for (const Registered& b : registry())
      if (b.info.applies(f->name)) owners.emplace_back(b.info.name);
    if (owners.empty() || std::find(owners.begin(), owners.end(), o.backend) != owners.end())
      continue;
    std::string which = owners.front();
    for (std::size_t i = 1; i < owners.size(); ++i)
      which += (i + 1 == owners.size() ? " and " : ", ") + owners[i];
    throw UsageError("-" + std::string(f->name) + " applies to the " + which + " backend" +
                     (owners.size() > 1 ? "s" : "") + ", not to -backend " + o.backend);
  }
}

// The chosen backend reads its own flags; it is told what every backend is told.
void choose_backend(Options& o, const FlagValues& values, const std::vector<std::string>& given) {
  Given was_given = [&](std::string_view f) {
    return std::find(given.begin(), given.end(), f) != given.end();
  };
  if (o.backend.empty()) select_backend(o, given);
  else
    o.backend_chosen_by =
        was_given("backend") ? "-backend " + o.backend : "LOCK_BACKEND=" + o.backend;
  const Registered* chosen = find_backend(o.backend);
  if (!chosen)
    throw UsageError("unknown backend '" + o.backend + "' (choose " + backend_names() + ")");
  check_flags_apply(o, was_given);
  std::unique_ptr<BackendConfig> config = chosen->info.configure(values, was_given);
  config->status_only = o.status;
  config->kill_after = o.kill_after;
  config->monitor_retry = o.monitor_retry;
  o.backend_config = std::move(config);
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

void check_health_check(const Options& o, const Given& given) {
  bool tuned = given("check-interval") || given("check-failures");
  if (o.check.command.empty() && (tuned || given("check")))
    throw UsageError(tuned ? "-check-interval and -check-failures go with -check"
                           : "-check needs a command");
  if (o.status && given("check")) throw UsageError("-check goes with a run, not -status");
  // Checks back to back would be a busy loop, not a health check.
  if (o.check.interval < std::chrono::milliseconds(100))
    throw UsageError("-check-interval must be at least 100ms");
  if (o.check.failures < 1) throw UsageError("-check-failures must be at least 1");
}

// What one flag's value cannot tell alone: its sign, or how it goes with the others and with the
// `words` after the options (the prefix and the child). Consul's own wording where `consul lock`
// has one.
void check_together(const Options& o, std::size_t words, const Given& given) {
  if (o.limit <= 0) throw UsageError("Lock holder limit must be positive");
  if (o.status && words != 1) throw UsageError("-status takes a prefix and no child");
  if (!o.status && words < 2) throw UsageError("Key prefix and child command must be specified");
  if (o.json && !o.status) throw UsageError("-json goes with -status");
  if (o.watch && !o.status) throw UsageError("-watch goes with -status");
  if (o.status && !o.metrics_file.empty())
    throw UsageError("-metrics-file goes with a run, not -status");
  if (o.timeout.count() < 0) throw UsageError("Timeout must be positive");
  if (o.monitor_retry < 0) throw UsageError("Number for 'monitor-retry' must be >= 0");
  if (o.kill_after.count() < 0) throw UsageError("-kill-after must not be negative");
  check_min_hold(o.min_hold);
  check_health_check(o, given);
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
    return std::find(given.begin(), given.end(), f.name) != given.end() ||
           (f.env && std::getenv(f.env));
  });
  try {
    cli.app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    for (std::size_t at; (at = msg.find("--")) != std::string::npos;) msg.erase(at, 1);
    throw UsageError(msg);
  }
  Options o;
  read_core(o, cli.values);
  if (o.version) return o;

  // `lock p -- cmd`, as flock(1) users write it: a child cannot be named "--".
  if (go.rest.size() > 1 && go.rest[1] == "--") go.rest.erase(go.rest.begin() + 1);
  check_together(o, go.rest.size(), [&](std::string_view f) {
    return std::find(given.begin(), given.end(), f) != given.end();
  });
  o.prefix = validate_prefix(go.rest[0]);
  o.child.assign(go.rest.begin() + 1, go.rest.end());
  if (o.name.empty()) {
    std::string joined;
    for (const auto& word : o.child) joined += (joined.empty() ? "" : " ") + word;
    o.name = "lock for '" + joined + "' at '" + o.prefix + "'";
  }
  choose_backend(o, cli.values, given);
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
  for (const FlagInfo* f : flag_table()) add(f->env);
  for (const Registered& b : registry()) {
    add(b.info.selecting_env);
    for (const char* name : b.info.variables) add(name);
  }
  return names;
}

}  // namespace lk
