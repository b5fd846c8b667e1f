#include "runner/runner.hpp"

#include <unistd.h>

#include <cstring>
#include <exception>

#include "net/wake.hpp"
#include "runner/children.hpp"
#include "runner/metrics_file.hpp"
#include "runner/min_hold.hpp"
#include "runner/reentry.hpp"
#include "runner/supervisor.hpp"
#include "runner/systemd_notify.hpp"
#include "runner/terminal.hpp"
#include "runner/wait_notice.hpp"
#include "util/duration.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

// Who holds and who waits: a courtesy for the messages below, so a failure to tell (or a stop
// signal that cut the answer short) is no error. Read by the backend's status reader, on a
// connection of its own: the backend that waits is not called back from inside its wait.
std::optional<PrefixStatus> status_of(const Options& o, const Wake& wake) {
  try {
    return carried(o.backend, o.backend_chosen_by).read_status(*o.backend_config, o.prefix, &wake);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// "still waiting for prefix 'p', held by pid 12 on web1 since ...".
std::string waiting_for(const Options& o, const Wake& wake) {
  std::string line = "still waiting for prefix '" + printable(o.prefix) + "'";
  if (auto s = status_of(o, wake)) {
    for (std::size_t i = 0; i < s->holders.size(); ++i)
      line += (i ? ", " : ", held by ") + s->holders[i].who();
    if (!s->waiters.empty())
      line += fmt::format(" ({} waiting, this one included)", s->waiters.size());
  }
  return line;
}

// systemd's status line while we wait: "waiting for p (1 of 1 held: pid 12 on web1 since ...)".
std::optional<std::string> waiting_status(const Options& o, const std::string& what,
                                          const Wake& wake) {
  auto s = status_of(o, wake);
  if (!s) return std::nullopt;  // keep the last line
  std::string line = "waiting for " + what;
  for (std::size_t i = 0; i < s->holders.size(); ++i)
    line += (i ? ", " : fmt::format(" ({} of {} held: ", s->holders.size(), o.limit)) +
            s->holders[i].who();
  return s->holders.empty() ? line : line + ")";
}

std::string env_value(const EnvVars& env, const std::string& key) {
  for (const auto& [k, v] : env)
    if (k == key) return v;
  return "";
}

// Tells systemd and -verbose what we wait for; returns it as a status line names it.
std::string announce_wait(const Options& o, SystemdNotify& systemd) {
  verbose("{} backend: waiting for {} on prefix '{}'{}", o.backend,
          o.limit == 1 ? "the lock" : fmt::format("one of {} slots", o.limit), o.prefix,
          o.timeout.count() ? " for at most " + format_go_duration(o.timeout) : "");
  std::string what = o.limit == 1
                         ? printable(o.prefix)
                         : fmt::format("one of {} slots of {}", o.limit, printable(o.prefix));
  systemd.status("waiting for " + what);
  return what;
}

// Runs `supervise`. Should it fail, the tree must be gone before the hold's destructor gives the
// lock up: the watchdog, told by its socket's closing, kills the tree and only then exits.
template <class Supervise>
RunResult tree_first(Watchdog& watchdog, Supervise supervise) {
  struct EndFirst {
    Watchdog& watchdog;
    ~EndFirst() {
      if (std::uncaught_exceptions()) watchdog.end();
    }
  } end_first{watchdog};
  return supervise();
}

// Tells systemd and -verbose what we hold.
void announce_hold(SystemdNotify& systemd, const std::string& what, const EnvVars& env) {
  systemd.status("holding " + what + ", token " + env_value(env, "LOCK_FENCING_TOKEN"));
  if (!verbose_enabled()) return;
  std::string vars;
  for (const auto& [k, v] : env) vars += (vars.empty() ? "" : " ") + k + "=" + v;
  verbose("acquired the lock; {}", vars);
}

// Children we had before the child, inherited across the exec that started us, are not of its
// tree. Without /proc, a scan finds them (when any).
std::set<pid_t> children_before_ours() {
  auto inherited = listed_children();
  if (!inherited && have_children()) inherited = scanned_children();
  std::set<pid_t> foreign;
  for (pid_t pid : inherited.value_or(std::vector<pid_t>{})) foreign.insert(pid);
  return foreign;
}

// The hold, unless a stop signal (`stop_signal()`, 0 for none) came first or meanwhile.
std::unique_ptr<Hold> take_hold(Backend& backend, const LockSpec& spec, Deadline deadline,
                                const Interrupt& interrupt, const Queued& queued,
                                SystemdNotify& systemd, const std::function<int()>& stop_signal) {
  std::unique_ptr<Hold> hold;
  try {
    hold = backend.acquire(spec, deadline, interrupt, queued);
  } catch (const Interrupted&) {
    std::string why =
        "interrupted by " + signal_name(stop_signal()) + " while waiting for the lock";
    systemd.stopping("stopping: " + why);
    throw Interrupted(why);
  }
  if (int sig = stop_signal()) {
    systemd.stopping("stopping: interrupted by " + signal_name(sig));
    hold->release();
    throw Interrupted("interrupted by " + signal_name(sig) +
                      " as the lock was acquired; released it");
  }
  return hold;
}

// What became of the child, when it is more than its exit status says.
void report(const RunResult& result, const std::string& program) {
  if (result.not_run && result.lost)
    fmt::print(stderr, "lock: lock lost before the child started: {}; did not run {}\n",
               *result.lost, program);
  else if (result.not_run)
    fmt::print(stderr, "lock: did not run {}: {}\n", program, *result.not_run);
  else if (result.unhealthy)
    fmt::print(stderr, "lock: gave up the lock: {}; the child was stopped\n", *result.lost);
  else if (result.lost)
    fmt::print(stderr, "lock: lock lost: {}; the child {}\n", *result.lost,
               result.ended_unstopped ? "had ended by itself" : "was stopped");
  if (result.unguarded) fmt::print(stderr, "lock: {}\n", *result.unguarded);
  if (result.exec_error)
    fmt::print(stderr, "lock: cannot run {}: {}\n", program, std::strerror(result.exec_error));
}

// How -metrics-file tells the run's end.
Outcome outcome_of(const RunResult& r) {
  if (r.unhealthy) return Outcome::unhealthy;
  if (r.lost) return Outcome::lost;
  if (r.unguarded || r.not_run || r.exec_error) return Outcome::error;
  return r.stop_signal ? Outcome::interrupted : Outcome::ran;
}

std::optional<int> child_status_of(const RunResult& r) {
  if (r.not_run || r.exec_error) return std::nullopt;
  return r.child.shell_status();
}

int run_once(const Options& o, MetricsFile& metrics) {
  // Read before the watchdog is one of them.
  std::set<pid_t> foreign = children_before_ours();
  // First, while nothing is open but what we were started with (see Watchdog()).
  auto argv = child_argv(o.child, o.shell);
  Watchdog watchdog({argv, o.pass_stdin, o.kill_after});
  foreign.insert(watchdog.pid());
  Signals signals;        // before anything that waits, so that no signal is missed
  SystemdNotify systemd;  // and the child inherits none of its variables
  auto backend = carried(o.backend, o.backend_chosen_by).make(*o.backend_config);
  LockSpec spec{o.prefix, o.limit, o.name};
  std::string what = announce_wait(o, systemd);
  int stop_signal = 0;  // the first one that came, kept until acted on
  auto stop_requested = [&] {
    if (!stop_signal) stop_signal = signals.take_stop_signal();
    return stop_signal != 0;
  };
  // A server slow to say who holds must not hold up a stop signal.
  Wake status_wake{{signals.fd()}, [&] { return !stop_requested(); }};
  WaitNotice notice(signals.fd(), systemd.timer_fd(), std::chrono::seconds(3));
  Interrupt interrupt{notice.fd(), [&] {
                        if (stop_requested()) return false;
                        notice.maybe_print([&] { return waiting_for(o, status_wake); });
                        if (systemd.tick())
                          if (auto line = waiting_status(o, what, status_wake))
                            systemd.status(*line);
                        return !stop_requested();
                      }};
  Queued queued = [&] {
    if (o.ready_when_queued) systemd.ready();
  };
  Deadline deadline = o.timeout.count() ? Deadline::after(o.timeout) : Deadline::never();
  std::unique_ptr<Hold> hold = take_hold(*backend, spec, deadline, interrupt, queued, systemd, [&] {
    stop_requested();
    return stop_signal;
  });
  auto acquired = Clock::now();
  metrics.acquired(acquired);
  auto env = hold->child_env();
  queued();  // -ready=wait, when nobody was in the way
  announce_hold(systemd, what, env);
  env.emplace_back("CONSUL_LOCK_HELD", "true");

  ChildStart child{argv, env, hold->child_fds(), o.pass_stdin && isatty(STDIN_FILENO)};
  std::optional<HealthCheck> check;
  if (!o.check.command.empty()) check.emplace(o.check, env, signals, foreign);
  RunResult result = tree_first(watchdog, [&] {
    return Supervisor(signals, *hold, watchdog, systemd, o.kill_after, std::move(foreign),
                      check ? &*check : nullptr)
        .run(child);
  });
  if (o.min_hold.count() && !result.lost && !result.unguarded && !result.stop_signal)
    result.lost = keep_until(acquired + o.min_hold, *hold, signals, systemd);
  hold->release();
  verbose("released the lock");

  metrics.ended(outcome_of(result), child_status_of(result));
  report(result, argv.front());
  return exit_code(result, o);
}

}  // namespace

int run(const Options& o) {
  if (auto outer = enclosing_hold(o)) {
    verbose(
        "prefix '{}' is held by an enclosing lock, one of our ancestors ({}): running the "
        "child at once, within that hold",
        printable(o.prefix), *outer);
    run_reentrant(o);
  }
  MetricsFile metrics(o);
  try {
    return run_once(o, metrics);
  } catch (const AcquireTimeout&) {
    metrics.ended(Outcome::conflict);
    throw;
  } catch (const Interrupted&) {
    metrics.ended(Outcome::interrupted);
    throw;
  } catch (...) {
    metrics.ended(Outcome::error);
    throw;
  }
}

}  // namespace lk
