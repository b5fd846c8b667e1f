#include "runner/watchdog.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdint>

#include "util/error.hpp"

namespace lk {
namespace {

enum Kind : std::int32_t { kGuard, kDisarm };
struct Message {
  std::int32_t kind;
  std::int32_t value;
};

// The watchdog's whole life. Signals stay blocked (inherited), so only SIGKILL ends it early.
[[noreturn]] void watch(int fd) {
  setsid();  // out of our group and session: ^C or a group kill aimed at lock does not reach it
  // Its command line is lock's; its name tells ps, top and pgrep which of the two it is.
  prctl(PR_SET_NAME, "lock-watchdog");
  if (fd < 3) fd = fcntl(fd, F_DUPFD, 3);
  close_range(0, fd - 1, 0);
  close_range(fd + 1, UINT_MAX, 0);
  pid_t pgid = 0;
  for (;;) {
    Message m{};
    ssize_t n = recv(fd, &m, sizeof m, MSG_WAITALL);
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof m) break;  // lock is gone
    if (m.kind == kGuard) pgid = m.value;
    if (m.kind == kDisarm) pgid = 0;
  }
  if (pgid > 0) kill(-pgid, SIGKILL);
  _exit(0);
}

}  // namespace

Watchdog::Watchdog(bool proc_lists_children) {
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
    if (pid_ == 0) watch(sv[1]);
    return;
  }
  int pid_pipe[2];
  if (pipe2(pid_pipe, O_CLOEXEC) < 0) throw sys_error("pipe");
  UniqueFd pid_in(pid_pipe[0]), pid_out(pid_pipe[1]);
  pid_t middle = fork();
  if (middle < 0) throw sys_error("cannot start the watchdog");
  if (middle == 0) {
    pid_t watchdog = fork();
    if (watchdog == 0) watch(sv[1]);
    (void)!write(pid_pipe[1], &watchdog, sizeof watchdog);
    _exit(0);
  }
  pid_out.reset();
  while (waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
  }
  // We may be that init (lock as a container's first process): then the watchdog is our child
  // after all, and the supervisor must know it.
  if (read(pid_in.get(), &pid_, sizeof pid_) != sizeof pid_) pid_ = -1;
}

namespace {

bool send_message(int socket, Message m) {
  return send(socket, &m, sizeof m, MSG_NOSIGNAL) == sizeof m;
}

}  // namespace

bool Watchdog::guard_me() const { return send_message(socket_.get(), {kGuard, getpid()}); }

// A watchdog that is gone has nothing left to disarm.
void Watchdog::disarm() { send_message(socket_.get(), {kDisarm, 0}); }

}  // namespace lk
