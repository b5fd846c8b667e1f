#include "runner/runner.hpp"

#include <unistd.h>

#include <cstring>

#include "backend/make_backend.hpp"
#include "cli/duration.hpp"
#include "runner/supervisor.hpp"
#include "runner/terminal.hpp"
#include "runner/wait_notice.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

// "still waiting for prefix 'p', held by pid 12 on web1 since ...".
std::string waiting_for(Backend& backend, const std::string& prefix) {
  std::string line = "still waiting for prefix '" + printable(prefix) + "'";
  try {
    PrefixStatus s = backend.status(prefix);
    for (std::size_t i = 0; i < s.holders.size(); ++i)
      line += (i ? ", " : ", held by ") + s.holders[i].who();
    if (!s.waiters.empty()) line += fmt::format(" ({} waiting, this one included)", s.waiters.size());
  } catch (const Error&) {
    // The notice is a courtesy; the wait goes on regardless.
  }
  return line;
}

}  // namespace

int run(const Options& o) {
  Signals signals;  // first, so that no signal is missed while we wait
  std::vector<int> pass_down = passed_down_fds();  // before any library opens its own
  auto backend = make_backend(o);
  Watchdog watchdog;
  LockSpec spec{o.prefix, o.limit, o.name};
  verbose("{} backend: waiting for {} on prefix '{}'{}", o.backend,
          o.limit == 1 ? "the lock" : fmt::format("one of {} slots", o.limit), o.prefix,
          o.timeout.count() ? " for at most " + format_go_duration(o.timeout) : "");

  int stop_signal = 0;
  WaitNotice notice(signals.fd(), std::chrono::seconds(3));
  Interrupt interrupt{notice.fd(), [&] {
                        notice.maybe_print([&] { return waiting_for(*backend, o.prefix); });
                        return (stop_signal = signals.take_stop_signal()) != 0;
                      }};
  Deadline deadline = o.timeout.count() ? Deadline::after(o.timeout) : Deadline::never();
  std::unique_ptr<Hold> hold;
  try {
    hold = backend->acquire(spec, deadline, interrupt);
  } catch (const Interrupted&) {
    throw Interrupted("interrupted by " + signal_name(stop_signal) + " while waiting for the lock");
  }
  if ((stop_signal = signals.take_stop_signal())) {
    hold->release();
    throw Interrupted("interrupted by " + signal_name(stop_signal) +
                      " as the lock was acquired; released it");
  }
  auto env = hold->child_env();
  verbose("acquired the lock; {}", [&] {
    std::string vars;
    for (const auto& [k, v] : env) vars += (vars.empty() ? "" : " ") + k + "=" + v;
    return vars;
  }());
  env.emplace_back("CONSUL_LOCK_HELD", "true");

  bool on_terminal = o.pass_stdin && isatty(STDIN_FILENO);
  ChildSpec child{child_argv(o.child, o.shell), env,           o.pass_stdin,
                  on_terminal, on_terminal && Foreground::available(), hold->child_fds()};
  child.inherit_fds.insert(child.inherit_fds.end(), pass_down.begin(), pass_down.end());
  RunResult result = Supervisor(signals, *hold, watchdog, o.kill_after).run(child);
  hold->release();
  verbose("released the lock");

  if (result.lost) fmt::print(stderr, "lock: lock lost: {}; the child was stopped\n", *result.lost);
  if (result.exec_error)
    fmt::print(stderr, "lock: cannot run {}: {}\n", child.argv.front(),
               std::strerror(result.exec_error));
  return exit_code(result, o);
}

}  // namespace lk
