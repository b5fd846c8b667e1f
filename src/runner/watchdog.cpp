#include "runner/watchdog.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <new>

#include "util/error.hpp"

namespace lk {
namespace {

// The watchdog's whole life. Signals stay blocked (inherited), so only SIGKILL ends it early.
// It wakes once: when lock is gone, its end of the socket closes, and the watchdog reads then
// which group, if any, it must kill.
[[noreturn]] void watch(int fd, const std::atomic<pid_t>* guarded) {
  setsid();  // out of our group and session: ^C or a group kill aimed at lock does not reach it
  // Its command line is lock's; its name tells ps, top and pgrep which of the two it is.
  prctl(PR_SET_NAME, "lock-watchdog");
  if (fd < 3) fd = fcntl(fd, F_DUPFD, 3);
  close_range(0, fd - 1, 0);
  close_range(fd + 1, UINT_MAX, 0);
  for (;;) {  // nobody writes to it: only its end (or an error) ends the wait
    char byte;
    ssize_t n = read(fd, &byte, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  pid_t pgid = guarded->load();
  if (pgid > 0) kill(-pgid, SIGKILL);
  _exit(0);
}

}  // namespace

Watchdog::Watchdog(bool proc_lists_children) {
  // What the watchdog guards is kept in memory shared with it rather than sent: telling it would
  // wake it twice a run (the group, then its end), for nothing unless lock dies.
  // Lock-free, so that it works across processes and from the child between vfork and exec.
  static_assert(std::atomic<pid_t>::is_always_lock_free);
  void* shared = mmap(nullptr, sizeof(std::atomic<pid_t>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) throw sys_error("cannot start the watchdog");
  guarded_.reset(new (shared) std::atomic<pid_t>(0));
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) throw sys_error("socketpair");
  UniqueFd theirs(sv[1]);
  socket_.reset(sv[0]);
  // Where /proc lists our children, the supervisor can leave this one out of the child's tree,
  // and one fork does. Without /proc it could not: it reaps whatever exits and knows the tree is
  // gone when no child is left, so the watchdog must not be a child; it forks twice, and the
  // middle process exits at once so that init (or an outer subreaper) adopts it. The middle
  // process and the wait for it cost about 0.15 ms a run (5 % of an uncontended one).
  if (proc_lists_children) {
    pid_ = fork();
    if (pid_ < 0) throw sys_error("cannot start the watchdog");
    if (pid_ == 0) watch(sv[1], guarded_.get());
    return;
  }
  int pid_pipe[2];
  if (pipe2(pid_pipe, O_CLOEXEC) < 0) throw sys_error("pipe");
  UniqueFd pid_in(pid_pipe[0]), pid_out(pid_pipe[1]);
  pid_t middle = fork();
  if (middle < 0) throw sys_error("cannot start the watchdog");
  if (middle == 0) {
    pid_t watchdog = fork();
    if (watchdog == 0) watch(sv[1], guarded_.get());
    (void)!write(pid_pipe[1], &watchdog, sizeof watchdog);
    _exit(0);
  }
  pid_out.reset();
  while (waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
  }
  // We may be that init (lock as a container's first process): then the watchdog is our child
  // after all, and the supervisor must know it.
  if (read(pid_in.get(), &pid_, sizeof pid_) != sizeof pid_ || pid_ < 0)
    throw Error("cannot start the watchdog");
}

void Watchdog::Unmap::operator()(std::atomic<pid_t>* p) const { munmap(p, sizeof *p); }

// Guarded from the store on, provided the watchdog is still there to read it when the socket
// closes: its end hung up means it is gone. A poll that fails tells nothing: not guarded either.
bool Watchdog::guard_me() const {
  guarded_->store(getpid());
  pollfd ours{socket_.get(), 0, 0};
  return poll(&ours, 1, 0) >= 0 && !(ours.revents & (POLLHUP | POLLERR));
}

void Watchdog::disarm() { guarded_->store(0); }

}  // namespace lk
