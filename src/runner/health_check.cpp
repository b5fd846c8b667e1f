#include "runner/health_check.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "runner/child.hpp"
#include "runner/children.hpp"
#include "util/deadline_timer.hpp"
#include "util/duration.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace lk {
namespace {

// Whether the timer went off since the last call.
bool went_off(int timer) {
  std::uint64_t expirations = 0;
  return read(timer, &expirations, sizeof expirations) == sizeof expirations && expirations > 0;
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) return "was killed by " + signal_name(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

HealthCheck::HealthCheck(const CheckSpec& spec, const EnvVars& env, const Signals& signals,
                         std::set<pid_t> ours)
    : spec_(spec), env_(env), signals_(signals), ours_(std::move(ours)) {}

HealthCheck::~HealthCheck() { stop(); }

void HealthCheck::start() {
  in_a_row_ = 0;
  timer_ = deadline_timer(Deadline::after(spec_.interval));
}

// The killed check is reaped by the next sweep(): not here, where the watchdog's death may have
// made the child's tree ours to reap (Supervisor::kill_orphans).
void HealthCheck::stop() {
  timer_.reset();
  kill_group();
  running_ = -1;
}

int HealthCheck::fd() const { return timer_.get(); }

std::optional<std::string> HealthCheck::on_event() {
  std::optional<std::string> give_up;
  if (running_ > 0) give_up = reaped();
  if (timer_ && went_off(timer_.get())) {
    if (running_ > 0) {  // its time is up
      kill_group();
      running_ = -1;
      give_up = failed("did not end within " + format_go_duration(spec_.interval));
    }
    if (!give_up) give_up = launch();
  }
  sweep();
  if (give_up) stop();
  return give_up;
}

std::optional<std::string> HealthCheck::launch() {
  // /bin/sh rather than $SHELL, which systemd sets to the login shell of the unit's User=, often
  // /usr/sbin/nologin.
  ChildSpec spec;
  spec.argv = {"/bin/sh", "-c", spec_.command};
  spec.env = env_;
  spec.restore = signals_.changed_dispositions();
  spec.output = verbose_enabled() ? STDERR_FILENO : -1;
  Spawned check = spawn_child(spec, signals_.original());
  set_deadline_timer(timer_.get(), Deadline::after(spec_.interval));
  if (check.pid > 0 && !check.exec_error) {
    running_ = check.pid;
    return std::nullopt;
  }
  // One that could not exec has exited already: sweep() reaps it.
  return failed("could not be started: " + std::string(std::strerror(check.exec_error)));
}

std::optional<std::string> HealthCheck::reaped() {
  siginfo_t ended{};
  bool seen = waitid(P_PID, running_, &ended, WEXITED | WNOHANG | WNOWAIT) == 0;
  if (seen && ended.si_pid == 0) return std::nullopt;  // still running
  // What it left behind goes first: until the leader is reaped, its group's id cannot be reused.
  kill_group();
  int status = 0;
  if (seen) waitpid(running_, &status, 0);
  running_ = -1;
  if (!seen) return failed("ended, and its status was lost");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    if (in_a_row_) verbose("the health check passed again");
    in_a_row_ = 0;
    return std::nullopt;
  }
  return failed(how_it_ended(status));
}

std::optional<std::string> HealthCheck::failed(const std::string& how) {
  ++in_a_row_;
  verbose("the health check {} ({} of {} failures in a row)", how, in_a_row_, spec_.failures);
  if (in_a_row_ < spec_.failures) return std::nullopt;
  if (in_a_row_ == 1) return "the health check " + how;
  return "the health check failed " + std::to_string(in_a_row_) + " times in a row (the last " +
         how + ")";
}

void HealthCheck::kill_group() {
  if (running_ > 0) kill(-running_, SIGKILL);
}

// Every child of ours but the watchdog, those we were started with and the running check is
// what an ended check left behind: killed, and reaped once dead. Without /proc (no list of
// children) only the checks' own groups are killed, and what left them is reaped at our exit.
void HealthCheck::sweep() {
  for (pid_t pid : listed_children().value_or(std::vector<pid_t>{})) {
    if (pid == running_ || ours_.contains(pid)) continue;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, WNOHANG);
  }
}

}  // namespace lk
