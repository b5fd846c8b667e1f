#include "runner/supervisor.hpp"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/duration.hpp"
#include "runner/children.hpp"
#include "runner/terminal.hpp"
#include "util/log.hpp"

namespace lk {
namespace {

ChildEnd child_end(const siginfo_t& info) {
  bool signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
  return {signaled, info.si_status};
}

}  // namespace

Supervisor::Supervisor(Signals& signals, Hold& hold, Watchdog& watchdog, SystemdNotify& systemd,
                       std::chrono::nanoseconds kill_after)
    : signals_(signals), hold_(hold), watchdog_(watchdog), systemd_(systemd), kill_after_(kill_after) {}

RunResult Supervisor::run(const ChildSpec& spec, std::optional<std::vector<pid_t>> inherited) {
  // Children we had before the child (inherited across the exec that started us, or the watchdog
  // when we are init) are not of its tree: never signalled, never waited for.
  foreign_.insert(watchdog_.pid());
  if (!inherited && have_children()) inherited = scanned_children();
  for (pid_t pid : inherited.value_or(std::vector<pid_t>{})) foreign_.insert(pid);
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) throw sys_error("cannot become a subreaper");
  // Also when started in the background: a later fg hands the terminal over (see suspend()).
  Foreground foreground(spec.on_terminal);
  foreground_ = &foreground;
  Spawned spawned = spawn_child(spec, signals_, watchdog_);
  child_ = spawned.pid;
  foreground.set_child(child_);
  child_running_ = true;
  verbose("started the child, pid {}: {}", child_, fmt::join(spec.argv, " "));
  if (spawned.exec_error)
    result_.exec_error = spawned.exec_error;
  else
    systemd_.ready();  // the child runs: what dependants of the unit wait for

  bool watching_loss = hold_.loss_fd() >= 0;
  while (!tree_gone_) {
    // A descriptor of -1 is skipped by poll.
    pollfd fds[3] = {{signals_.fd(), POLLIN, 0},
                     {watching_loss ? hold_.loss_fd() : -1, POLLIN, 0},
                     {systemd_.timer_fd(), POLLIN, 0}};
    timespec ts;
    Deadline wake = result_.lost ? kill_at_ : Deadline::earlier(kill_at_, hold_.stop_by());
    if (stopping_) wake = Deadline::earlier(wake, scan_next_ ? Deadline::after({}) : next_scan_);
    int n = ppoll(fds, 3, wake.remaining(ts), nullptr);
    if (n < 0 && errno != EINTR) throw sys_error("poll");
    if (n > 0 && (fds[0].revents & POLLIN))
      for (int sig : signals_.take()) on_signal(sig);
    if (n > 0 && fds[1].revents) {
      on_loss();
      watching_loss = !result_.lost;
    }
    if (n > 0 && fds[2].revents) systemd_.tick();
    if (!result_.lost && hold_.stop_by().passed())
      lose(hold_.check_loss().value_or("the lease was not renewed in time and may expire soon"));
    if (stopping_ && !killing_ && kill_at_.passed()) {
      verbose("the child tree outlived the grace period of {} or the lease; sending SIGKILL",
              format_go_duration(kill_after_));
      killing_ = true;
      kill_at_ = Deadline::never();
      signal_tree(SIGKILL, true);
    }
    if (stopping_ && (scan_next_ || next_scan_.passed())) scan_slice();
  }
  watchdog_.disarm();
  verbose("the child tree is gone");
  return result_;
}

void Supervisor::on_signal(int sig) {
  if (sig == SIGCHLD) return reap();
  if (sig == SIGTTOU) return;
  if (Signals::is_stop(sig) && !stopping_) {
    return stop(sig, "received " + signal_name(sig));
  }
  if (killing_) return;
  if (sig == SIGTSTP) tstp_forwarded_ = true;
  verbose("forwarding {} to the child's process group", signal_name(sig));
  kill(-child_, sig);
}

void Supervisor::on_loss() {
  if (auto why = hold_.check_loss()) lose(*why);
}

void Supervisor::lose(const std::string& why) {
  result_.lost = why;
  if (!stopping_) stop(SIGTERM, "lock lost: " + why);
  if (!killing_) kill_at_ = Deadline::earlier(kill_at_, hold_.dead_by());
}

// Collects every child that changed state: the direct one, or an orphan of the tree adopted by
// us. The direct child leads the process group and is reaped last: while its zombie lasts, the
// group's id stays reserved, so signalling the group can never reach a stranger that reused it.
void Supervisor::reap() {
  std::optional<std::vector<pid_t>> pids;
  for (bool reaped = true; reaped;) {  // until a pass finds nothing more to reap
    reaped = false;
    if (!(pids = children())) return reap_any();
    for (pid_t pid : *pids) {
      bool leader = pid == child_;
      siginfo_t info{};
      int flags = WEXITED | WSTOPPED | WNOHANG | (leader ? WNOWAIT : 0);
      if (waitid(P_PID, pid, &info, flags) < 0 || info.si_pid == 0) continue;
      if (info.si_code == CLD_STOPPED) {
        if (leader) waitid(P_PID, pid, &info, WSTOPPED | WNOHANG);  // take the event
        on_stopped(info);
      } else if (leader) {
        if (child_running_) on_child_exit(info);
      } else {
        reaped = true;
        signalled_.erase(pid);
      }
    }
  }
  if (!child_running_ && (pids->empty() || (pids->size() == 1 && pids->front() == child_))) {
    siginfo_t info{};
    waitid(P_PID, child_, &info, WEXITED | WNOHANG);
    tree_gone_ = true;  // a zombie leader has no live descendants: they were adopted by us
    return;
  }
  after_reap();
}

// Without /proc we cannot tell our children apart: reap whatever exits, the leader included.
void Supervisor::reap_any() {
  for (;;) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WSTOPPED | WNOHANG) < 0) {
      if (errno == EINTR) continue;
      tree_gone_ = true;  // ECHILD: nothing of the tree is left
      return;
    }
    if (info.si_pid == 0) break;  // some remain, none has exited
    if (info.si_code == CLD_STOPPED) {
      on_stopped(info);
    } else {
      signalled_.erase(info.si_pid);
      if (info.si_pid == child_) on_child_exit(info);
    }
  }
  after_reap();
}

void Supervisor::on_stopped(const siginfo_t& info) {
  bool job_control =
      info.si_status == SIGTSTP || info.si_status == SIGTTIN || info.si_status == SIGTTOU;
  if (info.si_pid == child_ && job_control && (foreground_->active() || tstp_forwarded_))
    suspend();
}

void Supervisor::on_child_exit(const siginfo_t& info) {
  child_running_ = false;
  result_.child = child_end(info);
  std::string how = fmt::format("the child exited ({} {})",
                                result_.child.signaled ? "signal" : "status", result_.child.code);
  verbose("{}", how);
  systemd_.stopping(how + "; releasing the lock");
}

void Supervisor::after_reap() {
  if (killing_) {
    signal_tree(SIGKILL, false);  // orphans adopted since the last round
  } else if (stopping_) {
    signal_escaped(stop_signal_, false);  // orphans adopted since, that the group signal missed
  } else if (!child_running_) {
    stop(SIGTERM, "the child exited; stopping the processes it left behind");
  }
}

// The child stopped for job control: stop too, as the job the user's shell knows is us, so that
// the shell gets the terminal back. When the shell continues us (fg or bg), continue the child.
void Supervisor::suspend() {
  tstp_forwarded_ = false;
  verbose("the child was suspended; suspending too");
  foreground_->give_back();
  // On a terminal, our whole group, as the terminal stops a job (a script that runs us too);
  // otherwise the ^Z was sent to us alone, and only we stop.
  if (foreground_->active())
    kill(0, SIGSTOP);
  else
    raise(SIGSTOP);
  foreground_->hand_over();
  verbose("continued; continuing the child");
  kill(-child_, SIGCONT);
}

void Supervisor::stop(int sig, const std::string& why) {
  verbose("{}; sending {} to the child tree", why, signal_name(sig));
  if (child_running_) systemd_.stopping("stopping the child: " + why);  // before the child hears
  stopping_ = true;
  stop_signal_ = sig;
  kill_at_ = Deadline::after(kill_after_);
  signal_tree(sig, true);
}

void Supervisor::signal_tree(int sig, bool new_round) {
  kill(-child_, sig);
  signal_escaped(sig, new_round);
}

// Our children outside the child's process group are orphans of the tree that left it, adopted
// by us: their pids cannot be reused before we reap them, so signalling them is safe. Each gets
// a given signal once.
void Supervisor::signal_escaped(int sig, bool new_round) {
  if (auto pids = children()) {
    for (pid_t pid : *pids) signal_escaped_one(pid, sig);
  } else if (new_round) {
    start_scan();  // without /proc
  }
}

void Supervisor::signal_escaped_one(pid_t pid, int sig) {
  if (getpgid(pid) != child_ && (sig == SIGKILL || signalled_.insert(pid).second)) kill(pid, sig);
}

// Without /proc, a scan of every pid finds them: when the stop and the kill begin, and while the
// tree lasts, again a second after the last (or later, so that scans take at most a fifth of a
// core). It goes a slice per turn of the run loop, so that signals, the loss and the kill
// deadline are served within milliseconds meanwhile; our children have low pids, found first.
void Supervisor::start_scan() {
  scan_next_ = 2;
  scan_started_ = Clock::now();
}

void Supervisor::scan_slice() {
  if (!scan_next_) start_scan();
  std::vector<pid_t> found;
  scan_next_ = scan_children(scan_next_, 65536, found);
  for (pid_t pid : without_foreign(std::move(found)))
    signal_escaped_one(pid, killing_ ? SIGKILL : stop_signal_);
  if (!scan_next_)
    next_scan_ = Deadline::after(std::max<Clock::duration>(std::chrono::seconds(1),
                                                           4 * (Clock::now() - scan_started_)));
}

std::vector<pid_t> Supervisor::without_foreign(std::vector<pid_t> pids) const {
  std::erase_if(pids, [&](pid_t pid) { return foreign_.contains(pid); });
  return pids;
}

std::optional<std::vector<pid_t>> Supervisor::children() const {
  auto pids = listed_children();
  if (!pids) return std::nullopt;
  return without_foreign(std::move(*pids));
}

}  // namespace lk
