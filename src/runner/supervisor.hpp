#pragma once
#include <signal.h>

#include <chrono>
#include <optional>
#include <set>
#include <vector>

#include "backend/backend.hpp"
#include "runner/exit_status.hpp"
#include "runner/health_check.hpp"
#include "runner/signals.hpp"
#include "runner/systemd_notify.hpp"
#include "runner/terminal.hpp"
#include "runner/tree.hpp"
#include "runner/watchdog.hpp"

namespace lk {

// What the child is started with, once the hold is confirmed.
struct ChildStart {
  std::vector<std::string> argv;  // as the watchdog runs it (for messages)
  EnvVars env;                    // added to our environment
  std::vector<int> fds;           // the hold's descriptors, kept open in the child tree
  bool on_terminal = false;       // its stdin is our terminal (-pass-stdin on a tty)
};

// Runs the child while the hold lasts. The watchdog starts the child and keeps its tree
// (watchdog.hpp); lock tells it what to do and learns from it what happened, in one loop over
// one poll set (the signalfd, the backend's loss descriptor, the watchdog's socket, systemd's
// timer). Each wake-up is one event:
//   a signal        stop signals begin the stop; others are passed on to the child's group
//   hold lost       begin the stop
//   the watchdog    the child stopped for job control (^Z): stop too, and continue it when we
//                   are continued; the child exited; the watchdog began the stop itself (the
//                   lease's deadline came without a renewal) or the kill; the tree is gone
//   watchdog died   before the tree did: what is left of the tree comes back to us, its
//                   subreaper, and we kill it (the child itself died with the watchdog)
//   SIGCHLD         the watchdog was stopped: continue it; once it died: reap the tree's rest
//   systemd timer   a watchdog ping, when systemd asked for them
//   -check's timer  a health check is due, or the running one's time is up (it ends with
//                   SIGCHLD): after -check-failures in a row, begin the stop, as for a loss
// and it returns only once the whole child tree is gone.
class Supervisor {
 public:
  // `foreign`: our children that are not of the child's tree (inherited across the exec that
  // started us, and the watchdog).
  // `check`: -check's, or null.
  Supervisor(Signals& signals, Hold& hold, Watchdog& watchdog, SystemdNotify& systemd,
             std::chrono::nanoseconds kill_after, std::set<pid_t> foreign, HealthCheck* check);
  RunResult run(const ChildStart& start);

 private:
  bool start_child(const ChildStart& start);
  std::optional<std::string> lost_already();
  void supervise();
  void on_signal(int sig);
  void on_loss();
  void on_check();
  void lose(const std::string& why);
  void take_reports();
  void on_report(const watchdog::ReportMessage& report);
  void on_deadline();
  std::string deadline_passed();
  void on_stopped(int sig);
  void on_exited(const watchdog::ReportMessage& report);
  void refused();
  void on_watchdog_died();
  void kill_orphans();
  void keep_watchdog_running();
  void reap();
  void stop(int sig, const std::string& why);
  void suspend();

  Signals& signals_;
  Hold& hold_;
  Watchdog& watchdog_;
  SystemdNotify& systemd_;
  std::chrono::nanoseconds kill_after_;
  std::set<pid_t> foreign_;
  HealthCheck* check_;
  RunResult result_;
  pid_t child_ = -1;  // and its process group
  bool child_running_ = false;
  bool tree_gone_ = false;
  bool stopping_ = false;
  bool killing_ = false;
  Foreground* foreground_ = nullptr;  // the terminal, while run() lasts
  bool tstp_forwarded_ = false;       // we passed a ^Z on; its stop is ours too
  std::optional<Tree> orphans_;       // what is left of the tree once the watchdog died
};

}  // namespace lk
