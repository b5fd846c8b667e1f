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

  int fd() const { return fd_.get(); }
  // Between fork and exec: gives the child the signal state we were started with.
  void restore_in_child() const;

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
  sigset_t original_;
  bool pipe_was_default_ = true;
  UniqueFd fd_;
};

std::string signal_name(int sig);  // "SIGTERM"

}  // namespace lk
