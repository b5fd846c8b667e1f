#include "runner/tree.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "runner/children.hpp"

namespace lk {
namespace {

ChildEnd child_end(const siginfo_t& info) {
  bool signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
  return {signaled, info.si_status};
}

}  // namespace

Tree::Reaped Tree::reap() {
  Reaped out;
  std::optional<std::vector<pid_t>> pids;
  for (bool reaped = true; reaped;) {  // until a pass finds nothing more to reap
    reaped = false;
    if (!(pids = children())) return reap_any();
    for (pid_t pid : *pids) {
      bool leader = pid == leader_;
      siginfo_t info{};
      int flags = WEXITED | WSTOPPED | WNOHANG | (leader ? WNOWAIT : 0);
      if (waitid(P_PID, pid, &info, flags) < 0 || info.si_pid == 0) continue;
      if (leader && info.si_code == CLD_STOPPED) {
        siginfo_t taken{};  // its own: the leader may have gone on or died since
        waitid(P_PID, pid, &taken, WSTOPPED | WNOHANG);
      }
      if (leader) {
        on_leader(info, out);
      } else if (info.si_code != CLD_STOPPED) {
        reaped = true;
        signalled_.erase(pid);
      }
    }
  }
  if (!leader_running_ && (pids->empty() || (pids->size() == 1 && pids->front() == leader_))) {
    siginfo_t info{};
    if (leader_ > 0) waitid(P_PID, leader_, &info, WEXITED | WNOHANG);
    group_unusable_ = true;
    gone_ = true;  // a zombie leader has no live descendants: they were adopted by us
  }
  return out;
}

// Without /proc we cannot tell our children apart: reap whatever exits, the leader included.
Tree::Reaped Tree::reap_any() {
  Reaped out;
  for (;;) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WSTOPPED | WNOHANG) < 0) {
      if (errno == EINTR) continue;
      gone_ = true;  // ECHILD: nothing of the tree is left
      return out;
    }
    if (info.si_pid == 0) return out;  // some remain, none has exited
    if (info.si_code != CLD_STOPPED) signalled_.erase(info.si_pid);
    if (info.si_pid != leader_) continue;
    on_leader(info, out);
    group_unusable_ = group_unusable_ || info.si_code != CLD_STOPPED;
  }
}

void Tree::on_leader(const siginfo_t& info, Reaped& out) {
  if (info.si_code == CLD_STOPPED) {
    out.stopped_by.push_back(info.si_status);
  } else if (leader_running_) {
    leader_running_ = false;
    out.ended = child_end(info);
  }
}

// Once the leader is reaped (which only a reap without /proc does before the end), its group's
// id may be reused: the group is left alone, and our children are signalled one by one.
void Tree::signal_group(int sig) {
  if (!group_unusable_) ::kill(-leader_, sig);
}

void Tree::stop(int sig) {
  stop_signal_ = sig;
  signal_group(sig);
  signal_group(SIGCONT);
  signal_escaped(true);
}

void Tree::kill() {
  killing_ = true;
  signal_group(SIGKILL);
  signal_escaped(true);
}

void Tree::signal_adopted() {
  if (killing_) signal_group(SIGKILL);
  if (stopping()) signal_escaped(false);
}

// Our children outside the child's process group are orphans of the tree that left it, adopted
// by us. Each gets the stop's signals once (SIGKILL as often as it takes).
void Tree::signal_escaped(bool new_round) {
  if (auto pids = children()) {
    for (pid_t pid : *pids) signal_escaped_one(pid);
  } else if (new_round) {
    start_scan();  // without /proc
  }
}

// Those in the group get its signal, while it may be signalled; after that, their own.
void Tree::signal_escaped_one(pid_t pid) {
  if (!group_unusable_ && getpgid(pid) == leader_) return;
  if (killing_) {
    ::kill(pid, SIGKILL);
  } else if (signalled_.insert(pid).second) {
    ::kill(pid, stop_signal_);
    ::kill(pid, SIGCONT);
  }
}

// Without /proc, a scan of every pid finds them: when the stop and the kill begin, and while the
// tree lasts, again a second after the last (or later, so that scans take at most a fifth of a
// core). It goes a slice per turn of the owner's loop, so that its other events are served
// within milliseconds meanwhile; our children have low pids, found first.
void Tree::start_scan() {
  scanning_ = true;
  scan_next_ = 2;
  scan_started_ = Clock::now();
}

Deadline Tree::next_scan() const {
  if (!scanning_) return Deadline::never();
  return scan_next_ ? Deadline::after({}) : next_scan_;
}

void Tree::scan_slice() {
  if (!scan_next_) start_scan();
  std::vector<pid_t> found;
  scan_next_ = scan_children(scan_next_, 65536, found);
  for (pid_t pid : without_foreign(std::move(found))) signal_escaped_one(pid);
  if (!scan_next_)
    next_scan_ = Deadline::after(
        std::max<Clock::duration>(std::chrono::seconds(1), 4 * (Clock::now() - scan_started_)));
}

std::vector<pid_t> Tree::without_foreign(std::vector<pid_t> pids) const {
  std::erase_if(pids, [&](pid_t pid) { return foreign_.contains(pid); });
  return pids;
}

std::optional<std::vector<pid_t>> Tree::children() const {
  auto pids = listed_children();
  if (!pids) return std::nullopt;
  return without_foreign(std::move(*pids));
}

}  // namespace lk
