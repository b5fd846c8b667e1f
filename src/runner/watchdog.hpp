#pragma once
// If lock dies, even by SIGKILL, the child's process group must die with it: PR_SET_PDEATHSIG
// reaches only the direct child, not what a shell started in the background. The watchdog is a
// small process in a session of its own that holds one end of a socket: when the other end closes
// while it guards a group, it kills that group.
#include <sys/types.h>

#include <atomic>
#include <memory>

#include "util/unique_fd.hpp"

namespace lk {

class Watchdog {
 public:
  // Forks the watchdog, before we wait for the lock, so that it costs nothing while we hold it.
  // It never counts as part of the child tree: the supervisor leaves pid() out when /proc lists
  // our children, and otherwise it is not our child (unless we are init).
  // `proc_lists_children`: whether listed_children() works here (see the constructor).
  explicit Watchdog(bool proc_lists_children);
  // Closing while guarding is what kills the group: an exception that leaves the tree running
  // ends in the safe state.
  ~Watchdog() = default;

  pid_t pid() const { return pid_; }
  // Called by the child itself between fork and exec (async-signal-safe): from then on, if we
  // vanish, its process group dies, even before we learn its pid.
  // False when the watchdog is gone (killed by hand, say): the child must not run.
  bool guard_me() const;
  void disarm();           // the tree is gone; the watchdog only waits for us to exit

  // What the child reports instead of an errno when guard_me() failed: no errno is negative.
  static constexpr int kGone = -1;

 private:
  struct Unmap {
    void operator()(std::atomic<pid_t>* p) const;
  };
  pid_t pid_ = -1;
  // In memory shared with the watchdog: the group it kills if we vanish, 0 for none.
  std::unique_ptr<std::atomic<pid_t>, Unmap> guarded_;
  UniqueFd socket_;
};

}  // namespace lk
