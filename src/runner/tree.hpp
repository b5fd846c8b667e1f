#pragma once
// The child's process tree, as its reaper sees it. The child leads a process group of its own,
// and we are the tree's subreaper: every process of it that is orphaned, even one that left the
// group or the session, becomes our child. So the group and our children reach all of it, and
// it is gone when no child of ours is left but the leader's zombie, which is reaped last: while
// it lasts, the group's id stays reserved, and signalling the group can never reach a stranger
// that reused it. Nor can signalling our own children: a pid is not reused before we reap it.
#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <set>
#include <vector>

#include "runner/exit_status.hpp"
#include "util/deadline.hpp"

namespace lk {

class Tree {
 public:
  // `foreign`: our children that are not of the tree, never signalled or waited for.
  // `group_usable`: false when the tree was adopted from a reaper that died, which may have
  // reaped the leader already (or never started it: `leader` -1); then only our own children
  // are signalled.
  Tree(pid_t leader, std::set<pid_t> foreign, bool group_usable = true)
      : leader_(leader), foreign_(std::move(foreign)), group_unusable_(!group_usable) {}
  // The leader's end was learnt otherwise (from the reaper that died).
  void leader_ended() { leader_running_ = false; }

  pid_t leader() const { return leader_; }
  bool leader_running() const { return leader_running_; }
  bool gone() const { return gone_; }

  // What reaping found of the leader: its stops for job control, and its end (once).
  struct Reaped {
    std::vector<int> stopped_by;  // the signals that stopped it
    std::optional<ChildEnd> ended;
  };
  Reaped reap();

  // Passes a signal on to the group.
  void signal_group(int sig);
  // The stop: `sig` and then SIGCONT (so that a stopped process can act on it) to the group and
  // to every child of ours outside it, each once.
  void stop(int sig);
  // SIGKILL to all of the tree.
  void kill();
  bool stopping() const { return stop_signal_ != 0 || killing_; }
  bool killing() const { return killing_; }
  // After a reap: the stop's signal (or SIGKILL) to the orphans we adopted since.
  void signal_adopted();
  // Without /proc, a scan of every pid finds the escaped ones: when is the next slice due?
  Deadline next_scan() const;
  void scan_slice();

 private:
  Reaped reap_listed(std::vector<pid_t> pids);
  Reaped reap_any();
  void on_leader(const siginfo_t& info, Reaped& out);
  void signal_escaped(bool new_round);
  void signal_escaped_one(pid_t pid);
  std::optional<std::vector<pid_t>> children() const;  // of the tree; nullopt without /proc
  std::vector<pid_t> without_foreign(std::vector<pid_t> pids) const;
  void start_scan();

  pid_t leader_;
  std::set<pid_t> foreign_;
  // The group's id may no longer be the tree's: the leader was reaped (or never known).
  bool group_unusable_;
  bool leader_running_ = true;
  bool gone_ = false;
  int stop_signal_ = 0;
  bool killing_ = false;
  std::set<pid_t> signalled_;  // escaped orphans that got the stop signal
  // Without /proc: the scan for escaped orphans (see start_scan()).
  pid_t scan_next_ = 0;  // where it goes on; 0 when none runs
  Clock::time_point scan_started_;
  Deadline next_scan_ = Deadline::never();
  bool scanning_ = false;  // a stop is under way: scans go on until the tree is gone
};

}  // namespace lk
