#include "runner/supervisor.hpp"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/duration.hpp"
#include "util/log.hpp"

namespace lk {

using watchdog::Command;
using watchdog::Report;
using watchdog::ReportMessage;

Supervisor::Supervisor(Signals& signals, Hold& hold, Watchdog& watchdog, SystemdNotify& systemd,
                       std::chrono::nanoseconds kill_after, std::set<pid_t> foreign,
                       HealthCheck* check)
    : signals_(signals),
      hold_(hold),
      watchdog_(watchdog),
      systemd_(systemd),
      kill_after_(kill_after),
      foreign_(std::move(foreign)),
      check_(check) {}

RunResult Supervisor::run(const ChildStart& start) {
  // Should the watchdog die, the tree comes back to us rather than to init.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) throw sys_error("cannot become a subreaper");
  // Also when started in the background: a later fg hands the terminal over (see suspend()).
  Foreground foreground(start.on_terminal);
  foreground_ = &foreground;
  // From the lease keeper's thread, until the hold is released: after this object has gone, but
  // never after the watchdog's handle has.
  Watchdog& watchdog = watchdog_;
  hold_.publish_deadline([&watchdog](Clock::time_point dead_by) { watchdog.publish(dead_by); });
  if (start_child(start)) supervise();
  return result_;
}

// False when the child never runs and nothing of it is left to wait for.
bool Supervisor::start_child(const ChildStart& start) {
  if (auto why = lost_already()) {  // lost between the acquisition and now
    result_.lost = why;
    result_.not_run = "the lock was lost first";
    return false;
  }
  bool take_terminal = start.on_terminal && Foreground::available();
  // Waiting for the child's exec costs lock a wake-up; only systemd's READY=1, the terminal and
  // -verbose need to know of it before it ends.
  bool wait = static_cast<bool>(systemd_) || start.on_terminal || verbose_enabled();
  keep_watchdog_running();  // stopped, it would never answer
  Start started = watchdog_.spawn(start.env, start.fds, take_terminal, wait);
  switch (started.outcome) {
    case Start::gone:
      result_.not_run = fmt::format(
          "lock's watchdog (pid {}) is gone, and without it the child "
          "would outlive a killed lock",
          watchdog_.pid());
      kill_orphans();  // had it started the child before it died, the child died with it
      return true;
    case Start::refused: refused(); return false;
    case Start::unconfirmed:
      child_running_ = true;
      if (check_) check_->start();
      return true;
    case Start::started: break;
  }
  child_running_ = true;
  if (check_) check_->start();
  child_ = started.child.pid;
  foreground_->set_child(child_);
  verbose("started the child, pid {}: {}", child_, fmt::join(start.argv, " "));
  if (started.child.exec_error) result_.exec_error = started.child.exec_error;
  else systemd_.ready();  // the child runs: what dependants of the unit wait for
  return true;
}

// Only when the loss descriptor says so: the check itself may cost a look at the server's answer
// or the lock file's path.
std::optional<std::string> Supervisor::lost_already() {
  pollfd loss{hold_.loss_fd(), POLLIN, 0};
  if (loss.fd < 0 || poll(&loss, 1, 0) <= 0) return std::nullopt;
  return hold_.check_loss();
}

void Supervisor::supervise() {
  bool watching_loss = hold_.loss_fd() >= 0;
  while (!tree_gone_) {
    // A descriptor of -1 is skipped by poll.
    pollfd fds[5] = {{signals_.fd(), POLLIN, 0},
                     {watching_loss ? hold_.loss_fd() : -1, POLLIN, 0},
                     {orphans_ ? -1 : watchdog_.fd(), POLLIN, 0},
                     {systemd_.timer_fd(), POLLIN, 0},
                     {check_ ? check_->fd() : -1, POLLIN, 0}};
    timespec ts;
    Deadline wake = orphans_ ? orphans_->next_scan() : Deadline::never();
    int n = ppoll(fds, 5, wake.remaining(ts), nullptr);
    if (n < 0 && errno != EINTR) throw sys_error("poll");
    // What the watchdog did comes first: after a long stop its account of it is the true one.
    if (n > 0 && fds[2].revents) take_reports();
    if (n > 0 && (fds[0].revents & POLLIN))
      for (int sig : signals_.take()) on_signal(sig);
    if (n > 0 && fds[1].revents) {
      on_loss();
      watching_loss = !result_.lost;
    }
    if (n > 0 && fds[3].revents) systemd_.tick();
    if (n > 0 && fds[4].revents) on_check();
    if (orphans_ && !tree_gone_ && orphans_->next_scan().passed()) orphans_->scan_slice();
  }
  verbose("the child tree is gone");
}

void Supervisor::take_reports() {
  while (!orphans_ && !tree_gone_) {
    auto report = watchdog_.take();
    if (!report) return;
    on_report(*report);
  }
}

void Supervisor::on_signal(int sig) {
  if (sig == SIGCHLD) {
    keep_watchdog_running();
    if (check_ && !orphans_)
      on_check();  // a check that ended (orphans_: every child is the tree's)
    return reap();
  }
  if (sig == SIGTTOU) return;
  if (Signals::is_stop(sig)) {
    if (!result_.stop_signal) result_.stop_signal = sig;
    if (!stopping_) return stop(sig, "received " + signal_name(sig));
  }
  if (killing_) return;
  if (sig == SIGTSTP) tstp_forwarded_ = true;
  verbose("forwarding {} to the child's process group", signal_name(sig));
  watchdog_.send(Command::forward, sig);
}

void Supervisor::on_loss() {
  if (auto why = hold_.check_loss()) lose(*why);
}

// The service the child runs is not healthy: the hold is given up as if lost, so that a standby
// takes over.
void Supervisor::on_check() {
  auto why = check_->on_event();
  if (!why || stopping_) return;
  result_.lost = *why;
  result_.unhealthy = true;
  stop(SIGTERM, "giving up the lock: " + *why);
}

void Supervisor::lose(const std::string& why) {
  if (!result_.lost) result_.lost = why;
  if (!stopping_) stop(SIGTERM, "lock lost: " + why);
}

void Supervisor::on_report(const ReportMessage& report) {
  switch (report.report) {
    case Report::stopped: return on_stopped(report.sig);
    case Report::signal:  // as if sent to us: unless we were started with it ignored
      return signals_.handles(report.sig) ? on_signal(report.sig) : void();
    case Report::exited: return on_exited(report);
    case Report::deadline: return on_deadline();
    case Report::killing:
      killing_ = true;
      verbose("the child tree outlived the grace period of {} or the lease; sending SIGKILL",
              format_go_duration(kill_after_));
      return;
    case Report::gone:
      if (watchdog_.died()) return on_watchdog_died();
      if (report.ended) on_exited(report);
      // A tree that ended by itself past its lease (the whole machine was stopped, say) ran
      // without the lock for a while: lost all the same.
      if (report.late && !result_.lost) result_.lost = deadline_passed();
      tree_gone_ = true;
      return;
    case Report::refused:
      refused();
      tree_gone_ = true;
      return;
    case Report::started: return;
  }
}

// The watchdog took the stop over: we did not begin it in time ourselves.
void Supervisor::on_deadline() {
  std::string why = deadline_passed();
  result_.lost = why;
  stopping_ = true;
  if (check_) check_->stop();
  verbose("lock lost: {}; the watchdog sent SIGTERM to the child tree", why);
  if (child_running_) systemd_.stopping("stopping the child: lock lost: " + why);
}

// A lease that ran out while we did not run says so, whatever the keeper found on waking;
// otherwise the keeper may know why.
std::string Supervisor::deadline_passed() {
  auto dead_by = watchdog_.published();
  auto now = Clock::now();
  if (dead_by && now > *dead_by)
    return fmt::format(
        "the lease ran out {} ago without a confirmed renewal, while lock did not "
        "run (stopped, paused, starved, or the machine asleep)",
        format_go_duration(std::chrono::round<std::chrono::milliseconds>(now - *dead_by)));
  return hold_.check_loss().value_or(
      "no renewal of the lease was confirmed in time, and it may expire soon; lock's watchdog "
      "began the stop");
}

// The child stopped for job control: stop too, as the job the user's shell knows is us, so that
// the shell gets the terminal back. When the shell continues us (fg or bg), continue the child.
void Supervisor::on_stopped(int sig) {
  bool job_control = sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
  if (job_control && (foreground_->active() || tstp_forwarded_)) suspend();
}

// A stopped or starved lock asked for the child once its lease's stop was due.
void Supervisor::refused() {
  child_running_ = false;
  result_.lost = hold_.check_loss().value_or(
      "the lease's deadline came before the child could start (was lock stopped or starved?)");
  result_.not_run = "the lock was lost first";
}

void Supervisor::on_exited(const ReportMessage& report) {
  if (child_ <= 0) child_ = report.pid;  // not waited for at its start
  if (report.error) result_.exec_error = report.error;
  child_running_ = false;
  if (check_) check_->stop();
  result_.child = {report.signaled, report.code};
  result_.ended_unstopped = !stopping_;
  std::string how =
      fmt::format("the child exited ({} {})", report.signaled ? "signal" : "status", report.code);
  verbose("{}", how);
  systemd_.stopping(how + "; releasing the lock");
  if (report.sig && !stopping_)
    verbose("the child left processes behind; sending {} to the child tree",
            signal_name(report.sig));
  stopping_ = stopping_ || report.sig != 0;
}

// It died before the tree did (killed by hand, or by the child): the child died with it, and
// what is left of the tree is ours now. Killed at once: nothing would stop it if we died too.
void Supervisor::on_watchdog_died() {
  // Not reaped: its pid stays reserved, and cannot come back as one of the tree's that
  // Tree::children() would take for foreign.
  siginfo_t info{};
  waitid(P_PID, watchdog_.pid(), &info, WEXITED | WNOWAIT);
  std::string how = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED
                        ? "was killed by " + signal_name(info.si_status)
                        : "ended";
  result_.unguarded = fmt::format(
      "lock's watchdog (pid {}) {}; the child tree was killed, since "
      "without the watchdog it would outlive a killed lock",
      watchdog_.pid(), how);
  verbose("{}", *result_.unguarded);
  systemd_.stopping("stopping the child: " + *result_.unguarded);
  kill_orphans();
}

// What is left of the tree once the watchdog is gone came back to us, its subreaper.
void Supervisor::kill_orphans() {
  stopping_ = killing_ = true;
  if (check_) check_->stop();
  orphans_.emplace(child_ > 0 ? child_ : -1, foreign_, /*group_usable=*/false);
  if (!child_running_ || child_ <= 0) orphans_->leader_ended();
  orphans_->kill();
  reap();
}

// Whoever stopped it, it must go on: a stopped watchdog would neither reap the child nor stop
// the tree should lock die. Said on stderr: no part of lock stops it.
void Supervisor::keep_watchdog_running() {
  if (auto sig = watchdog_.continue_if_stopped())
    fmt::print(stderr, "lock: warning: lock's watchdog (pid {}) was stopped by {}; continued it\n",
               watchdog_.pid(), signal_name(*sig));
}

void Supervisor::reap() {
  if (!orphans_) return;  // our only child of the tree's is the watchdog, heard from on its socket
  auto reaped = orphans_->reap();
  if (reaped.ended && child_running_) {
    child_running_ = false;
    result_.child = *reaped.ended;
  }
  if (orphans_->gone()) tree_gone_ = true;
  else orphans_->signal_adopted();
}

// Checks of a stopped service would fail: they pause with it.
void Supervisor::suspend() {
  tstp_forwarded_ = false;
  if (check_) check_->stop();
  verbose("the child was suspended; suspending too");
  foreground_->give_back();
  // On a terminal, our whole group, as the terminal stops a job (a script that runs us too);
  // otherwise the ^Z was sent to us alone, and only we stop.
  if (foreground_->active()) kill(0, SIGSTOP);
  else raise(SIGSTOP);
  foreground_->hand_over();
  verbose("continued; continuing the child");
  watchdog_.send(Command::resume);
  if (check_ && !stopping_) check_->start();
}

void Supervisor::stop(int stop_signal, const std::string& why) {
  int sig = signals_.for_child(stop_signal);
  verbose("{}; sending {} to the child tree", why, signal_name(sig));
  if (child_running_) systemd_.stopping("stopping the child: " + why);  // before the child hears
  stopping_ = true;
  if (check_) check_->stop();
  watchdog_.send(Command::stop, sig);
}

}  // namespace lk
