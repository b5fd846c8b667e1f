#pragma once
#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "runner/signals.hpp"
#include "runner/watchdog.hpp"

namespace lk {

struct ChildSpec {
  std::vector<std::string> argv;  // run through $PATH
  EnvVars env;                    // added to (or replacing) our environment
  bool pass_stdin = false;        // else /dev/null
  bool on_terminal = false;       // its stdin is our terminal (-pass-stdin on a tty)
  bool take_terminal = false;     // ... and we are in the foreground: give it the terminal now
  std::vector<int> inherit_fds;   // descriptors to keep open across exec
  // Whether every other descriptor closes at exec, whatever its close-on-exec flag (for what a
  // library may have opened without it); if not, they cross exec as their flags say.
  bool close_unlisted = true;
};

// The descriptors above stdio that we were started with and that would cross exec: the
// caller's to pass on to the child (`lock p cmd 3>file`), as flock(1) does.
std::vector<int> passed_down_fds();

// The argv `consul lock` would run: $SHELL -c "<words joined by spaces>" (/bin/sh when SHELL is
// unset or empty), or the words themselves with -shell=false.
std::vector<std::string> child_argv(const std::vector<std::string>& words, bool shell);

struct Spawned {
  pid_t pid = -1;     // also the id of its process group
  // errno of a failed exec, or Watchdog::kGone; the child has then already exited with 126 or 127
  int exec_error = 0;
};

// Starts the child in a process group of its own, which the watchdog guards before the child
// runs anything of its own.
Spawned spawn_child(const ChildSpec& spec, const Signals& signals, const Watchdog& watchdog);

}  // namespace lk
