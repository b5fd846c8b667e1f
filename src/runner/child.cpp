#include "runner/child.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "util/error.hpp"

extern char** environ;

namespace lk {
namespace {

std::vector<std::string> merged_environment(const EnvVars& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& [key, value] : extra)
      replaced |= entry.size() > key.size() && entry.starts_with(key) && entry[key.size()] == '=';
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [key, value] : extra) env.push_back(key + "=" + value);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Tells the parent why, and exits as a shell would: 127 for "not found", 126 otherwise. The
// parent, suspended until we exec or exit, reads the error from the memory we share with it.
[[noreturn]] void fail(volatile int* report, int err) {
  *report = err;
  _exit(err == ENOENT ? 127 : 126);
}

// Between vfork and exec only async-signal-safe calls: everything was prepared before.
[[noreturn]] void exec_child(const ChildSpec& spec, char** argv, char** envp, pid_t parent,
                             volatile int* report, const sigset_t& mask) {
  setpgid(0, 0);
  // Should the watchdog die (killed by hand, or by the child), lock adopts what is left of the
  // tree and kills it; the child itself goes at once.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // it died before the line above took effect
  if (spec.take_terminal) tcsetpgrp(STDIN_FILENO, getpid());
  if (!spec.pass_stdin) {
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, STDIN_FILENO) < 0) fail(report, errno);
    close(null);
  }
  if (spec.output != -2) {
    int out = spec.output >= 0 ? spec.output : open("/dev/null", O_WRONLY);
    if (out < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(out, STDERR_FILENO) < 0)
      fail(report, errno);
    if (out > STDERR_FILENO) close(out);
  }
  for (int fd : spec.inherit_fds) fcntl(fd, F_SETFD, 0);
  if (spec.ignore_sigchld) signal(SIGCHLD, SIG_IGN);
  for (auto [sig, ignored] : spec.restore) signal(sig, ignored ? SIG_IGN : SIG_DFL);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  execvpe(argv[0], argv, envp);
  fail(report, errno);
}

}  // namespace

std::vector<std::string> child_argv(const std::vector<std::string>& words, bool shell) {
  if (!shell) return words;
  std::string script;
  for (const auto& w : words) script += (script.empty() ? "" : " ") + w;
  const char* sh = std::getenv("SHELL");
  return {sh && *sh ? sh : "/bin/sh", "-c", script};
}

Spawned spawn_child(const ChildSpec& spec, const sigset_t& mask) {
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<std::string> env_strings = merged_environment(spec.env);
  auto argv = c_strings(argv_strings);
  auto envp = c_strings(env_strings);

  volatile int exec_error = 0;
  pid_t parent = getpid();
  // vfork: the child borrows our memory until it execs, so starting it copies no page tables.
  // It runs only exec_child, which touches nothing but its arguments, exec_error and system calls.
  pid_t pid = vfork();
  if (pid < 0) return Spawned{-1, errno};  // as good as an exec that failed
  if (pid == 0) exec_child(spec, argv.data(), envp.data(), parent, &exec_error, mask);

  // With vfork we resume only once the child has exec'd (or failed to, and said why in
  // exec_error): its process group and its hold on the terminal exist already, and setting them
  // again here could undo what the child's own children did since (an interactive shell takes
  // the terminal for itself).
  return Spawned{pid, exec_error};
}

}  // namespace lk
