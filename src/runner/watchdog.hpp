#pragma once
// The watchdog: the process that starts the child and keeps its tree, so that the promise "the
// child runs only while the lock is held" does not rest on lock being scheduled or alive.
//
// Why the tree's parent rather than a bystander: the watchdog is the child's parent and the tree's
// subreaper, so every process of the tree, even one that left the group or the session, ends up
// its child when orphaned; whatever it signals cannot be a stranger that reused a pid, since a
// pid is not reused before its parent reaps it. A bystander told the tree's pids could not tell
// a daemon that double-forked away from it, nor a reused pid from a member, once lock is gone,
// and a cgroup is delegated to few users. lock stays the watchdog's parent and a subreaper too, so
// that what is left of the tree comes back to lock should the watchdog die.
//
// The watchdog stops the tree (see watchdog_process.cpp):
//   when lock asks           a stop signal, the hold lost, the child's end (what it left behind)
//   when lock dies           SIGKILL to all of the tree at once, even by SIGKILL or the OOM killer
//   at the lease's deadline  published by lock in shared memory at every confirmed renewal: a
//                            lock that is stopped, paused, swapped out or wedged cannot keep the
//                            child past it (stop_plan.hpp)
// and holds the hold's descriptors (the local backend's slot) until the tree is gone. A watchdog
// that is stopped (by hand, or by the child) is continued as soon as lock hears of it, and with
// every stop lock asks for: SIGCONT to our own child, which cannot be a stranger while we have
// not reaped it. Neither lock nor the watchdog is dumpable, so that the child, which runs as our
// user, cannot trace either.
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "runner/child.hpp"
#include "runner/watchdog_protocol.hpp"
#include "util/unique_fd.hpp"

namespace lk {

// What the watchdog knows of the child from the command line, before it is forked.
struct WatchdogSetup {
  std::vector<std::string> argv;
  bool pass_stdin = false;
  std::chrono::nanoseconds kill_after{};
};

// What became of a request to start the child.
struct Start {
  enum Outcome {
    started,      // and exec'd, or failed to: `child` says
    unconfirmed,  // not waited for: its pid and an exec's failure come with its end
    refused,      // the lease's stop was due already: it never ran (Report::refused)
    gone,         // the watchdog is gone
  } outcome;
  Spawned child;
};

class Watchdog {
 public:
  // Forks the watchdog. Call it first, while lock is one thread with nothing open of its own:
  // the watchdog then holds nothing of lock's (no lock file, no connection), and what it passes
  // on to the child is exactly what lock was started with.
  explicit Watchdog(const WatchdogSetup& setup);
  // Closing our end while the tree runs is what kills it.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  pid_t pid() const { return pid_; }
  // Readable when the watchdog reports something, or is gone.
  int fd() const { return socket_.get(); }

  // The lease-safe deadline, from any thread: the tree must be dead by then.
  void publish(Clock::time_point dead_by);
  std::optional<Clock::time_point> published() const;
  // Starts the child with `env` added and `fds` kept open; with `wait`, returns once it has
  // exec'd or failed to.
  Start spawn(const EnvVars& env, const std::vector<int>& fds, bool take_terminal, bool wait);
  void send(watchdog::Command command, int sig = 0);
  // The next report (nullopt when none is waiting and `wait` is false); Report::gone also when
  // the watchdog's end closed, and died() then says so.
  std::optional<watchdog::ReportMessage> take(bool wait = false);
  bool died() const { return died_; }
  // A watchdog stopped (by the child, say: `kill -STOP $PPID`) cannot reap the child, nor stop
  // the tree when lock dies: continued at once. Returns the signal that stopped it, if it was.
  std::optional<int> continue_if_stopped();
  // Closes our end and waits for the watchdog to exit, which it does once the tree is gone: what
  // an error that cuts a run short must do before the hold is given up.
  void end();

 private:
  struct Unmap {
    void operator()(watchdog::Shared* shared) const;
  };
  pid_t pid_ = -1;
  std::unique_ptr<watchdog::Shared, Unmap> shared_;
  UniqueFd socket_;
  bool died_ = false;
};

}  // namespace lk
