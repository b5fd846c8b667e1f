#pragma once
// All signals lock reacts to are blocked and read from a signalfd in the main loop, never
// handled asynchronously.
#include <signal.h>

#include <sys/types.h>

#include <string>
#include <vector>

#include "util/unique_fd.hpp"

namespace lk {

class Signals {
 public:
  Signals();   // blocks the signals and opens the signalfd
  ~Signals();  // restores the mask we started with
  // For the watchdog: every signal blocked, so that only SIGKILL (and SIGSTOP) reach it; fd()
  // reads SIGCHLD and the signals lock passes on, whatever their disposition (lock judges).
  // Its SIGCHLD is taken back to the default; ignored_at_start() tells the child's.
  struct BlockAll {};
  explicit Signals(BlockAll);

  int fd() const { return fd_.get(); }
  const sigset_t& original() const { return original_; }  // the mask we were started with
  // Whether a signal reaches us through fd(): not one we were started with ignored, but SIGINT
  // and SIGTERM, which always stop us.
  bool handles(int sig) const { return sigismember(&set_, sig) == 1; }
  // Of the signals lock passes on or stops for, SIGCHLD and SIGPIPE.
  bool ignored_at_start(int sig) const { return sigismember(&ignored_, sig) == 1; }
  // The dispositions lock changed for itself, as it was started with them, for a process it
  // starts (a -check): (signal, ignored at start). Not SIGCHLD, whose default lock keeps.
  std::vector<std::pair<int, bool>> changed_dispositions() const;
  // The signal that passes a stop on to the child: the one we got, or SIGTERM when the child
  // ignores that one from its start, as we were started ignoring it (SIGINT in a script's
  // background job), so that it may still end cleanly before -kill-after.
  int for_child(int sig) const;

  // The signals that arrived since the last call, oldest first; never blocks.
  std::vector<int> take();
  struct Received {
    int sig;
    pid_t sender;  // for a signal sent with kill(); 0 for one from the kernel
  };
  std::vector<Received> take_received();
  // Drains pending signals and says whether one of them asks us to stop (and which); for use
  // before the child runs.
  int take_stop_signal();

  static bool is_stop(int sig);  // SIGHUP, SIGINT, SIGQUIT, SIGTERM

 private:
  sigset_t ignored_;  // dispositions we were started with, before we changed any
  sigset_t original_, set_;
  UniqueFd fd_;
};

std::string signal_name(int sig);  // "SIGTERM"

}  // namespace lk
