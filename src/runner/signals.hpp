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
  struct BlockAll {};
  explicit Signals(BlockAll);

  int fd() const { return fd_.get(); }
  const sigset_t& original() const { return original_; }  // the mask we were started with
  // Whether a signal reaches us through fd(): not one we were started with ignored.
  bool handles(int sig) const { return sigismember(&set_, sig) == 1; }

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
  sigset_t original_, set_;
  UniqueFd fd_;
};

std::string signal_name(int sig);  // "SIGTERM"

}  // namespace lk
