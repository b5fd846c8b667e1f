#pragma once
// -check: a command that says whether the service the child runs is healthy, run every
// -check-interval from the child's start, each run given that interval to end. After
// -check-failures failures in a row the hold is given up (the supervisor stops the child and the
// lock is released), so that a standby takes over from a server that hangs rather than dies.
//
// A check is lock's own child, run with /bin/sh -c, in a process group of its own, with the
// child's environment (LOCK_FENCING_TOKEN, ...) and the signal dispositions lock was started
// with (SIGCHLD at its default, which a shell needs to know its commands' status). What is left
// of its group when it ends, or when its time is up, is killed, and so is what left the group
// (setsid, timeout(1)) once it comes back to lock, a subreaper, whose children are all a check's
// but the watchdog and those lock was started with: a check leaves nothing behind to pile up
// over a long hold. Its output goes to our stderr with -verbose, to /dev/null otherwise.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>

#include "backend/backend.hpp"
#include "cli/options.hpp"
#include "runner/signals.hpp"
#include "util/unique_fd.hpp"

namespace lk {

class HealthCheck {
 public:
  // `ours`: our children that are no check's (the watchdog, and those we were started with).
  HealthCheck(const CheckSpec& spec, const EnvVars& env, const Signals& signals,
              std::set<pid_t> ours);
  ~HealthCheck();  // kills a check still running
  HealthCheck(const HealthCheck&) = delete;
  HealthCheck& operator=(const HealthCheck&) = delete;

  // The first check comes one interval from now, with no failure counted.
  void start();
  // No more checks, until start(): a running one is killed.
  void stop();
  // Readable when a check is due, or the running one's time is up; -1 when stopped.
  int fd() const;
  // After fd() was readable, or SIGCHLD came: reaps what ended and starts what is due. Returns
  // why the hold must be given up, once -check-failures checks in a row failed.
  std::optional<std::string> on_event();

 private:
  std::optional<std::string> launch();
  // What became of the running check, once it ended: nullopt for a pass.
  std::optional<std::string> reaped();
  std::optional<std::string> failed(const std::string& how);
  void kill_group();
  void sweep();

  CheckSpec spec_;
  EnvVars env_;
  const Signals& signals_;
  std::set<pid_t> ours_;
  UniqueFd timer_;
  pid_t running_ = -1;  // the check's pid and process group
  int in_a_row_ = 0;
};

}  // namespace lk
