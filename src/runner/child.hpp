#pragma once
#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "backend/backend.hpp"

namespace lk {

// The child gets the descriptors lock was started with, as flock(1)'s does (`lock p cmd 3>file`):
// the watchdog that starts it was forked before lock opened any, and every one it opens itself is
// close-on-exec. The hold's descriptors cross too (`inherit_fds`).
struct ChildSpec {
  std::vector<std::string> argv;  // run through $PATH
  EnvVars env;                    // added to (or replacing) our environment
  bool pass_stdin = false;        // else /dev/null
  bool take_terminal = false;     // its stdin is the terminal and lock in its foreground: give
                                  // it the terminal now
  std::vector<int> inherit_fds;   // descriptors to keep open across exec
  bool ignore_sigchld = false;    // as lock was started: its starter needs the default
  // Signals whose disposition to set before exec: (signal, ignored). For a process that lock
  // starts itself, after it changed some of its own (Signals::changed_dispositions).
  std::vector<std::pair<int, bool>> restore;
  int output = -2;  // its stdout and stderr: ours (-2), /dev/null (-1), or this descriptor
};

// The argv `consul lock` would run: $SHELL -c "<words joined by spaces>" (/bin/sh when SHELL is
// unset or empty), or the words themselves with -shell=false.
std::vector<std::string> child_argv(const std::vector<std::string>& words, bool shell);

struct Spawned {
  pid_t pid = -1;  // also the id of its process group; -1 when no process could be made
  // errno of a failed exec (the child has then already exited with 126 or 127) or fork
  int exec_error = 0;
};

// Starts the child, in a process group of its own, killed if its parent (the watchdog, or lock
// for a -check) dies, with `mask` as its signal mask.
Spawned spawn_child(const ChildSpec& spec, const sigset_t& mask);

}  // namespace lk
