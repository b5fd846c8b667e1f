#include "runner/watchdog.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "runner/watchdog_process.hpp"
#include "util/error.hpp"

namespace lk {

using watchdog::Command;
using watchdog::CommandMessage;
using watchdog::Report;
using watchdog::ReportMessage;

Watchdog::Watchdog(const WatchdogSetup& setup) {
  // The child runs as our user, which may trace any of that user's processes that are dumpable:
  // one attached to the watchdog would keep it from ever acting, and then kill lock. Neither
  // of us is, from here on (the watchdog inherits it); the child is again, from its exec.
  if (prctl(PR_SET_DUMPABLE, 0) < 0) throw sys_error("cannot start the watchdog");
  void* memory = mmap(nullptr, sizeof(watchdog::Shared), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) throw sys_error("cannot start the watchdog");
  shared_.reset(new (memory) watchdog::Shared);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    throw sys_error("cannot start the watchdog");
  socket_.reset(sv[0]);
  UniqueFd theirs(sv[1]);
  pid_ = fork();
  if (pid_ < 0) throw sys_error("cannot start the watchdog");
  if (pid_ == 0) {
    socket_.reset();
    watchdog_main(theirs.release(), *shared_, setup);
  }
}

Watchdog::~Watchdog() { socket_.reset(); }

std::optional<int> Watchdog::continue_if_stopped() {
  // Neither reaped nor waited for as it exits (WEXITED is not asked): that stays
  // on_watchdog_died's.
  siginfo_t info{};
  if (died_ || waitid(P_PID, pid_, &info, WSTOPPED | WNOHANG) < 0 || info.si_pid != pid_)
    return std::nullopt;
  kill(pid_, SIGCONT);  // our own child, not yet reaped: it cannot be a stranger
  return info.si_status;
}

void Watchdog::Unmap::operator()(watchdog::Shared* shared) const { munmap(shared, sizeof *shared); }

void Watchdog::end() {
  socket_.reset();
  siginfo_t info{};
  while (waitid(P_PID, pid_, &info, WEXITED) < 0 && errno == EINTR) {
  }
}

void Watchdog::publish(Clock::time_point dead_by) {
  shared_->dead_by_ns.store(dead_by.time_since_epoch().count());
}

std::optional<Clock::time_point> Watchdog::published() const {
  std::int64_t ns = shared_->dead_by_ns.load();
  if (!ns) return std::nullopt;
  return Clock::time_point(Clock::duration(ns));
}

Start Watchdog::spawn(const EnvVars& env, const std::vector<int>& fds, bool take_terminal,
                      bool wait) {
  std::string environment;
  for (const auto& [key, value] : env) environment += key + "=" + value + '\0';
  watchdog::SpawnMessage head{{Command::spawn, take_terminal, wait, 0}, environment.size()};
  if (!send_spawn(socket_.get(), head, environment, fds)) return {Start::gone, {}};
  if (!wait) return {Start::unconfirmed, {}};
  while (auto r = take(/*wait=*/true)) {
    if (r->report == Report::started) return {Start::started, {r->pid, r->error}};
    if (r->report == Report::refused) return {Start::refused, {}};
    if (r->report == Report::gone) break;
  }
  return {Start::gone, {}};
}

void Watchdog::send(Command command, int sig) {
  CommandMessage message{command, false, false, sig};
  // A watchdog that is gone will say so by its end closing, which the supervisor also polls.
  while (::send(socket_.get(), &message, sizeof message, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
  if (command == Command::stop) kill(pid_, SIGCONT);  // stopped by hand, it could not act
}

std::optional<ReportMessage> Watchdog::take(bool wait) {
  if (died_) return ReportMessage{Report::gone};
  ReportMessage message{};
  for (;;) {
    ssize_t n = recv(socket_.get(), &message, sizeof message, wait ? 0 : MSG_DONTWAIT);
    if (n == sizeof message) return message;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::nullopt;
    died_ = true;  // its end closed (or broke) before it said the tree was gone
    return ReportMessage{Report::gone};
  }
}

}  // namespace lk
