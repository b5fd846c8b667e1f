// The watchdog's side: it starts the child and keeps its tree. Like the supervisor's, its life is
// one loop over one poll set, and each wake-up is one event:
//   lock's command   pass a signal on to the child's group, begin the stop, continue the group
//   lock is gone     its end of the socket closed (lock died, even by SIGKILL): SIGKILL to all
//                    of the tree
//   SIGCHLD          reap; tell lock of the child's stops for job control and of its end, then
//                    stop whatever it left behind
//   the stop plan    (a timer on the boot clock while a lease is kept) the lease-safe deadline
//                    came without a renewal: begin the stop; the grace period or the deadline
//                    ran out: SIGKILL (stop_plan.hpp)
//   the scan         without /proc, a slice of the search for escaped orphans
// Once the tree is gone it closes the hold's descriptors, says so, and exits.
//
// It never writes to the terminal or a log: a full pipe would wedge it, and it is there for
// when lock is wedged. It blocks every signal it can, so that only SIGKILL (or SIGSTOP, which
// only someone allowed to kill it can send) gets in its way.
#include "runner/watchdog_process.hpp"

#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>

#include "runner/signals.hpp"
#include "runner/stop_plan.hpp"
#include "runner/systemd_notify.hpp"
#include "runner/tree.hpp"
#include "util/log.hpp"

namespace lk {
namespace {

using namespace watchdog;

class TreeGuard {
 public:
  TreeGuard(int socket, const Shared& shared, const WatchdogSetup& setup)
      : socket_(socket), shared_(shared), setup_(setup), plan_(setup.kill_after) {}
  void run();

 private:
  void start(Spawn spawn);
  void turn();
  void read_deadline();
  void keep_to_plan();
  void arm_timer();
  void on_lock();
  void on_signals();
  void on_reaped(const Tree::Reaped& reaped);
  void begin_stop(int sig);
  void kill_tree();
  void report(ReportMessage message, bool may_drop = false);
  ReportMessage ended(Report report, int sig, const ChildEnd& end) const;

  int socket_;
  const Shared& shared_;
  const WatchdogSetup& setup_;
  Signals signals_{Signals::BlockAll{}};  // the child gets the mask lock was started with
  StopPlan plan_;
  Spawned child_;
  std::optional<Tree> tree_;
  std::vector<UniqueFd> held_;  // the hold's descriptors: the hold lasts as long as the tree
  UniqueFd timer_;              // on the boot clock, once there is a lease to keep
  std::optional<Clock::time_point> armed_at_;
  bool lock_gone_ = false;
  ReportMessage gone_{Report::gone};  // the last report
};

void TreeGuard::run() {
  auto spawn = receive_spawn(socket_);
  if (!spawn) return;  // lock ended before a child was due
  try {
    start(std::move(*spawn));
    while (tree_ && !tree_->gone()) turn();
  } catch (...) {
    // Nothing of the tree may outlive a watchdog that cannot go on. What is left of it after
    // this comes back to lock, its subreaper, which sees us gone and kills the rest.
    if (tree_) tree_->kill();
    return;
  }
  held_.clear();  // the local backend's slot: free only now that nothing of the tree runs
  read_deadline();
  gone_.late = plan_.dead_by() && Clock::now() > *plan_.dead_by();
  report(gone_);
}

// A stopped or starved lock may ask for the child late: not once its stop is due.
void TreeGuard::start(Spawn spawn) {
  read_deadline();
  if (plan_.stop_due(Clock::now())) return report({Report::refused});
  ChildSpec spec;
  spec.argv = setup_.argv;
  spec.env = std::move(spawn.env);
  spec.pass_stdin = setup_.pass_stdin;
  spec.take_terminal = spawn.take_terminal;
  spec.ignore_sigchld = signals_.ignored_at_start(SIGCHLD);
  for (const auto& fd : spawn.fds) spec.inherit_fds.push_back(fd.get());
  held_ = std::move(spawn.fds);
  signals_.take();  // sent while we waited: not the child's, which did not exist
  child_ = spawn_child(spec, signals_.original());
  if (spawn.report_start) report({Report::started, std::max(child_.pid, 0), child_.exec_error});
  if (child_.pid < 0) {  // no process to be had: told as a child that could not be run
    gone_ = ended(Report::gone, 0, ChildEnd{false, 126});
    return;
  }
  tree_.emplace(child_.pid, std::set<pid_t>{});
}

void TreeGuard::turn() {
  keep_to_plan();
  if (tree_->gone()) return;
  Deadline wake = tree_->next_scan();
  if (plan_.dead_by()) {
    arm_timer();
  } else if (auto at = plan_.next()) {
    wake = Deadline::earlier(wake, Deadline(*at));  // a grace period alone: no timer needed
  }
  pollfd fds[3] = {{lock_gone_ ? -1 : socket_, POLLIN, 0},
                   {signals_.fd(), POLLIN, 0},
                   {timer_ ? timer_.get() : -1, POLLIN, 0}};
  timespec ts;
  int n = ppoll(fds, 3, wake.remaining(ts), nullptr);
  if (n < 0 && errno != EINTR) throw sys_error("poll");
  if (n > 0 && fds[0].revents) on_lock();
  if (n > 0 && (fds[1].revents & POLLIN)) on_signals();
  if (n > 0 && (fds[2].revents & POLLIN)) {
    std::uint64_t expirations;
    (void)!read(timer_.get(), &expirations, sizeof expirations);
    armed_at_.reset();
  }
  if (!tree_->gone() && tree_->next_scan().passed()) tree_->scan_slice();
}

// Read at every wake-up: lock moves the deadline without waking us, and the timer, set for the
// deadline we knew, wakes us to read the one it moved to.
void TreeGuard::read_deadline() {
  if (std::int64_t ns = shared_.dead_by_ns.load())
    plan_.lease(Clock::time_point(Clock::duration(ns)));
}

void TreeGuard::keep_to_plan() {
  read_deadline();
  auto now = Clock::now();
  if (plan_.stop_due(now)) {
    begin_stop(SIGTERM);
    report({Report::deadline});
  }
  if (plan_.kill_due(now)) {
    kill_tree();
    report({Report::killing});
  }
}

// Absolute, on the boot clock: after a suspend it fires at once if the deadline passed meanwhile.
void TreeGuard::arm_timer() {
  auto at = plan_.next();
  if (at == armed_at_) return;
  if (!timer_) {
    timer_.reset(timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC));
    if (!timer_) throw sys_error("timerfd_create");
  }
  itimerspec when{};
  if (at) {
    auto ns = std::max<std::int64_t>(1, at->time_since_epoch().count());
    when.it_value = {static_cast<time_t>(ns / 1'000'000'000), ns % 1'000'000'000};
  }
  if (timerfd_settime(timer_.get(), TFD_TIMER_ABSTIME, &when, nullptr) < 0)
    throw sys_error("timerfd_settime");
  armed_at_ = at;
}

void TreeGuard::on_lock() {
  for (;;) {
    CommandMessage message{};
    ssize_t n = recv(socket_, &message, sizeof message, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n != sizeof message) {  // lock's end closed: it died
      lock_gone_ = true;
      return kill_tree();
    }
    if (message.command == Command::forward && !tree_->killing()) tree_->signal_group(message.sig);
    else if (message.command == Command::stop) begin_stop(message.sig);
    else if (message.command == Command::resume) tree_->signal_group(SIGCONT);
  }
}

// A child that signals its parent (kill $PPID) means lock, its parent until the watchdog came
// between them: it is passed on to lock. Signals from anyone else are not ours to act on.
void TreeGuard::on_signals() {
  for (auto [sig, sender] : signals_.take_received()) {
    if (sig == SIGCHLD) on_reaped(tree_->reap());
    else if (sender == tree_->leader() && tree_->leader_running())
      report({Report::signal, 0, 0, sig}, /*may_drop=*/true);
  }
}

void TreeGuard::on_reaped(const Tree::Reaped& reaped) {
  for (int sig : reaped.stopped_by) report({Report::stopped, 0, 0, sig}, /*may_drop=*/true);
  if (tree_->gone()) {  // the child was the last: its end goes with the tree's, in one report
    if (reaped.ended) gone_ = ended(Report::gone, 0, *reaped.ended);
    return;
  }
  bool was_stopping = tree_->stopping();
  if (reaped.ended && !was_stopping) begin_stop(SIGTERM);  // what the child left behind
  if (reaped.ended) report(ended(Report::exited, was_stopping ? 0 : SIGTERM, *reaped.ended));
  if (was_stopping) tree_->signal_adopted();
}

ReportMessage TreeGuard::ended(Report report, int sig, const ChildEnd& end) const {
  return {report, std::max(child_.pid, 0), child_.exec_error, sig, end.signaled, end.code, true};
}

// Once the stop has begun, a stop signal is passed on like any other.
void TreeGuard::begin_stop(int sig) {
  if (tree_->stopping()) {
    if (!tree_->killing()) tree_->signal_group(sig);
    return;
  }
  plan_.stopping(Clock::now());
  tree_->stop(sig);
}

void TreeGuard::kill_tree() {
  plan_.killing();
  tree_->kill();
}

// Every report but a stop or a relayed signal comes at most once a run, far fewer than the socket
// holds, so the send cannot block even while lock is stopped. A child stopped and continued, or
// signalling, again and again while lock is stopped could fill it: such a report is dropped once
// the socket is half full, which leaves the room the others need.
void TreeGuard::report(ReportMessage message, bool may_drop) {
  if (lock_gone_) return;
  if (may_drop) {
    int queued = 0, room = 0;
    socklen_t size = sizeof room;
    if (ioctl(socket_, SIOCOUTQ, &queued) < 0 ||
        getsockopt(socket_, SOL_SOCKET, SO_SNDBUF, &room, &size) < 0 || queued > room / 2)
      return;
  }
  while (send(socket_, &message, sizeof message, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

}  // namespace

[[noreturn]] void watchdog_main(int socket, const Shared& shared, const WatchdogSetup& setup) {
  // Out of lock's process group but in its session: a kill of lock's group (^C, the shell's
  // kill %1) does not reach it, and the child it starts may take the session's terminal.
  setpgid(0, 0);
  prctl(PR_SET_NAME, "lock-watchdog");  // its command line is lock's; ps and pgrep tell them apart
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  set_verbose(false);
  SystemdNotify::forget_environment();  // lock alone notifies systemd
  try {
    TreeGuard(socket, shared, setup).run();
  } catch (...) {
    // Signals could not be set up before the child started: lock sees us gone and runs nothing.
  }
  _exit(0);
}

}  // namespace lk
