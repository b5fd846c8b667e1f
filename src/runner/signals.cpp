#include "runner/signals.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include "util/error.hpp"

namespace lk {
namespace {

// Stop signals, the ones forwarded to the child and ^Z: these honour an ignored disposition we
// inherited, but for kAlwaysStop.
constexpr int kForwarded[] = {SIGHUP,  SIGINT,   SIGQUIT, SIGTERM, SIGUSR1,
                              SIGUSR2, SIGWINCH, SIGALRM, SIGTSTP};
// A shell without job control starts a script's background commands with SIGINT (and SIGQUIT)
// ignored, and `lock p cmd & ... kill -INT $!` must still end lock, as it ends `consul lock`
// (Go installs its handler whatever it inherited). SIGHUP and SIGQUIT ignored stay so: nohup.
constexpr int kAlwaysStop[] = {SIGINT, SIGTERM};
// Always ours: SIGCHLD for reaping, SIGCONT to pass on fg and bg, and SIGTTOU so that giving the
// terminal back from the background does not stop us.
constexpr int kOwn[] = {SIGCHLD, SIGCONT, SIGTTOU};

bool ignored(int sig) {
  struct sigaction current;
  return sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

// Before any is changed: the child is to start with them as they are now.
sigset_t ignored_now() {
  sigset_t out;
  sigemptyset(&out);
  for (int sig : kForwarded)
    if (ignored(sig)) sigaddset(&out, sig);
  for (int sig : {SIGCHLD, SIGPIPE})
    if (ignored(sig)) sigaddset(&out, sig);
  return out;
}

}  // namespace

Signals::Signals() : ignored_(ignored_now()) {
  sigemptyset(&set_);
  // A signal we were started with ignored (nohup) stays ignored by us, as it would by any other
  // program; by the child too, whatever we do (it inherits the dispositions we were started
  // with, through the watchdog). Not SIGCHLD: see below.
  for (int sig : kForwarded)
    if (!ignored_at_start(sig)) sigaddset(&set_, sig);
  for (int sig : kAlwaysStop) sigaddset(&set_, sig);
  for (int sig : kOwn) sigaddset(&set_, sig);
  if (sigprocmask(SIG_BLOCK, &set_, &original_) < 0) throw sys_error("sigprocmask");
  // Blocked first, so that the default action cannot end us before the signalfd reads it.
  for (int sig : kAlwaysStop)
    if (ignored_at_start(sig)) signal(sig, SIG_DFL);
  // An ignored SIGCHLD (left by a parent) would have the kernel reap our children behind our back.
  signal(SIGCHLD, SIG_DFL);
  fd_.reset(signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_) throw sys_error("signalfd");
  // A vanished reader of our stderr must not kill us while a child still holds the lock. The
  // child is started by the watchdog, which leaves SIGPIPE as we were started with it.
  signal(SIGPIPE, SIG_IGN);
}

Signals::Signals(BlockAll) : ignored_(ignored_now()) {
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

// The dispositions first: a stop signal still pending is then dropped as we were started to drop
// it, rather than ending us with its default action once unblocked.
Signals::~Signals() {
  for (int sig : kAlwaysStop)
    if (ignored_at_start(sig)) signal(sig, SIG_IGN);
  sigprocmask(SIG_SETMASK, &original_, nullptr);
}

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

std::vector<std::pair<int, bool>> Signals::changed_dispositions() const {
  std::vector<std::pair<int, bool>> out;
  for (int sig : {SIGINT, SIGTERM, SIGPIPE}) out.emplace_back(sig, ignored_at_start(sig));
  return out;
}

int Signals::for_child(int sig) const {
  return is_stop(sig) && ignored_at_start(sig) ? SIGTERM : sig;
}

bool Signals::is_stop(int sig) {
  return sig == SIGHUP || sig == SIGINT || sig == SIGQUIT || sig == SIGTERM;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace lk
