#pragma once
#include <signal.h>

#include <chrono>
#include <optional>
#include <set>
#include <vector>

#include "backend/backend.hpp"
#include "runner/child.hpp"
#include "runner/exit_status.hpp"
#include "runner/signals.hpp"
#include "runner/systemd_notify.hpp"
#include "runner/terminal.hpp"
#include "runner/watchdog.hpp"

namespace lk {

// Runs the child while the hold lasts: one loop over one poll set (the signalfd and the
// backend's loss descriptor, with the kill deadline as timeout). Each wake-up is one event:
//   a signal        stop signals are forwarded and start the stop; others are forwarded
//   SIGCHLD         reap; when the child itself exits, stop what it left behind; when it stops
//                   for job control (^Z), stop with it
//   hold lost       stop the child
//   lease stop_by   stop the child, as if lost: its lease may expire at dead_by, the kill deadline
//   kill deadline   SIGKILL to whatever of the tree is left
//   systemd timer   a watchdog ping, when systemd asked for them
// and it returns only once the whole child tree is gone: we are its subreaper, so every process
// it started, even one that left its process group, becomes our child when orphaned, and the
// tree is gone when no child of ours is left but the leader's zombie, which is reaped last.
class Supervisor {
 public:
  Supervisor(Signals& signals, Hold& hold, Watchdog& watchdog, SystemdNotify& systemd,
             std::chrono::nanoseconds kill_after);
  // `inherited`: our children before the child was started (listed_children()).
  RunResult run(const ChildSpec& spec, std::optional<std::vector<pid_t>> inherited);

 private:
  void on_signal(int sig);
  void on_loss();
  void lose(const std::string& why);
  void reap();
  void reap_any();
  void on_stopped(const siginfo_t& info);
  void on_child_exit(const siginfo_t& info);
  void after_reap();
  std::optional<std::vector<pid_t>> children() const;  // of the tree; nullopt without /proc
  std::vector<pid_t> without_foreign(std::vector<pid_t> pids) const;
  void stop(int sig, const std::string& why);
  void suspend();
  // new_round: the stop or the kill begins (rather than orphans adopted since, after a reap).
  void signal_tree(int sig, bool new_round);
  void signal_escaped(int sig, bool new_round);
  void signal_escaped_one(pid_t pid, int sig);
  void start_scan();
  void scan_slice();

  Signals& signals_;
  Hold& hold_;
  Watchdog& watchdog_;
  SystemdNotify& systemd_;
  std::chrono::nanoseconds kill_after_;
  RunResult result_;
  pid_t child_ = -1;  // and its process group
  bool child_running_ = false;
  bool tree_gone_ = false;
  bool stopping_ = false;
  bool killing_ = false;
  int stop_signal_ = 0;
  std::set<pid_t> signalled_;  // escaped orphans that got the stop signal
  std::set<pid_t> foreign_;    // our children that are not of the child's tree
  Foreground* foreground_ = nullptr;  // the terminal, while run() lasts
  bool tstp_forwarded_ = false;  // we passed a ^Z on; its stop is ours too
  Deadline kill_at_ = Deadline::never();
  // Without /proc: the scan for escaped orphans (see start_scan()).
  pid_t scan_next_ = 0;  // where it goes on; 0 when none runs
  Clock::time_point scan_started_;
  Deadline next_scan_ = Deadline::never();
};

}  // namespace lk
