#include "runner/watchdog.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "util/error.hpp"

namespace lk {
namespace {

bool receive(int fd, std::int32_t& value) {
  ssize_t n;
  while ((n = recv(fd, &value, sizeof value, MSG_WAITALL)) < 0 && errno == EINTR) {
  }
  return n == sizeof value;
}

void close_all_except(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned next = 0;
  for (int fd : keep) {
    if (fd < 0 || static_cast<unsigned>(fd) < next) continue;
    if (static_cast<unsigned>(fd) > next) close_range(next, fd - 1, 0);
    next = fd + 1;
  }
  close_range(next, UINT_MAX, 0);
}

// The watchdog's whole life. Signals stay blocked (inherited), so only SIGKILL ends it early.
[[noreturn]] void watch(int fd, std::vector<int> keep_open) {
  setsid();  // out of our group and session: ^C or a group kill aimed at lock does not reach it
  keep_open.push_back(fd);
  close_all_except(keep_open);
  std::int32_t pgid = 0, done = 1;
  if (receive(fd, pgid) && pgid > 0 && !receive(fd, done)) kill(-pgid, SIGKILL);
  while (done == 0 && receive(fd, done)) {
  }
  _exit(0);
}

void send_value(int fd, std::int32_t value) {
  if (send(fd, &value, sizeof value, MSG_NOSIGNAL) != sizeof value)
    throw sys_error("cannot reach the watchdog");
}

}  // namespace

Watchdog::Watchdog(const std::vector<int>& keep_open) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) throw sys_error("socketpair");
  UniqueFd ours(sv[0]), theirs(sv[1]);
  pid_t middle = fork();
  if (middle < 0) throw sys_error("cannot start the watchdog");
  if (middle == 0) {
    // Fork twice so the watchdog is adopted by init (or the nearest subreaper), not by us.
    if (fork() == 0) watch(sv[1], keep_open);
    _exit(0);
  }
  while (waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {
  }
  socket_ = std::move(ours);
}

void Watchdog::guard(pid_t pgid) { send_value(socket_.get(), pgid); }

void Watchdog::disarm() { send_value(socket_.get(), 0); }

}  // namespace lk
