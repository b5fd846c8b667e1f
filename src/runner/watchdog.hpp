#pragma once
// If lock dies, even by SIGKILL, the child's process group must die with it: PR_SET_PDEATHSIG
// reaches only the direct child, not what a shell started in the background. The watchdog is a
// small process outside our process group and session that holds one end of a socket: when the
// other end closes before we said the tree is gone, it kills the child's group.
#include <sys/types.h>

#include <vector>

#include "util/unique_fd.hpp"

namespace lk {

class Watchdog {
 public:
  // Forks the watchdog, detached: it is not our child, so reaping the child tree never waits for
  // it. Call before becoming a subreaper. It keeps `keep_open` open until we are gone: closing an
  // inotify descriptor waits for an RCU grace period, several milliseconds that nobody should
  // wait for, so the last close is left to the watchdog, whose exit nobody waits on.
  explicit Watchdog(const std::vector<int>& keep_open);
  // Closing without disarm() is what kills the group: an exception that leaves the tree running
  // ends in the safe state.
  ~Watchdog() = default;

  void guard(pid_t pgid);  // the group to kill if we vanish
  void disarm();           // the tree is gone; the watchdog only waits for us to exit

 private:
  UniqueFd socket_;
};

}  // namespace lk
