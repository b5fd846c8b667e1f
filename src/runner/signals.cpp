#include "runner/signals.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include "util/error.hpp"

namespace lk {
namespace {

// Stop signals, the ones forwarded to the child and ^Z: these honour an ignored disposition we
// inherited.
constexpr int kForwarded[] = {SIGHUP,  SIGINT,   SIGQUIT, SIGTERM, SIGUSR1,
                              SIGUSR2, SIGWINCH, SIGALRM, SIGTSTP};
// Always ours: SIGCHLD for reaping, SIGCONT to pass on fg and bg, and SIGTTOU so that giving the
// terminal back from the background does not stop us.
constexpr int kOwn[] = {SIGCHLD, SIGCONT, SIGTTOU};

bool ignored(int sig) {
  struct sigaction current;
  return sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

}  // namespace

Signals::Signals() {
  sigemptyset(&set_);
  // A signal we were started with ignored (nohup; ^C for a background job of a script) stays
  // ignored, by us and by the child, as it would for any other program. Not SIGCHLD: see below.
  for (int sig : kForwarded)
    if (!ignored(sig)) sigaddset(&set_, sig);
  for (int sig : kOwn) sigaddset(&set_, sig);
  // An ignored SIGCHLD (left by a parent) would have the kernel reap our children behind our back.
  signal(SIGCHLD, SIG_DFL);
  if (sigprocmask(SIG_BLOCK, &set_, &original_) < 0) throw sys_error("sigprocmask");
  fd_.reset(signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_) throw sys_error("signalfd");
  // A vanished reader of our stderr must not kill us while a child still holds the lock. The
  // child is started by the watchdog, which leaves SIGPIPE as we were started with it.
  signal(SIGPIPE, SIG_IGN);
}

Signals::Signals(BlockAll) {
  sigset_t all;
  sigfillset(&all);
  if (sigprocmask(SIG_BLOCK, &all, &original_) < 0) throw sys_error("sigprocmask");
  signal(SIGCHLD, SIG_DFL);
  sigemptyset(&set_);
  for (int sig : kForwarded) sigaddset(&set_, sig);
  sigaddset(&set_, SIGCHLD);
  fd_.reset(signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_) throw sys_error("signalfd");
}

Signals::~Signals() { sigprocmask(SIG_SETMASK, &original_, nullptr); }

std::vector<int> Signals::take() {
  std::vector<int> out;
  for (auto [sig, sender] : take_received()) out.push_back(sig);
  return out;
}

std::vector<Signals::Received> Signals::take_received() {
  std::vector<Received> out;
  signalfd_siginfo info;
  while (read(fd_.get(), &info, sizeof info) == sizeof info) {
    bool sent = info.ssi_code == SI_USER || info.ssi_code == SI_QUEUE;
    out.push_back({static_cast<int>(info.ssi_signo), sent ? static_cast<pid_t>(info.ssi_pid) : 0});
  }
  return out;
}

int Signals::take_stop_signal() {
  int stop = 0;
  for (int sig : take()) {
    if (is_stop(sig) && !stop) stop = sig;
    if (sig == SIGTSTP) raise(SIGSTOP);  // ^Z while waiting suspends us, as it would any job
  }
  return stop;
}

bool Signals::is_stop(int sig) {
  return sig == SIGHUP || sig == SIGINT || sig == SIGQUIT || sig == SIGTERM;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace lk
