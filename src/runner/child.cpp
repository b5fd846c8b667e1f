#include "runner/child.hpp"

#include <linux/close_range.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

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

// Tells the parent why, and exits as a shell would: 127 for "not found", 126 otherwise.
[[noreturn]] void fail(int report_fd, int err) {
  (void)!write(report_fd, &err, sizeof err);
  _exit(err == ENOENT ? 127 : 126);
}

// Between vfork and exec only async-signal-safe calls: everything was prepared before.
[[noreturn]] void exec_child(const ChildSpec& spec, char** argv, char** envp, pid_t parent,
                             int report_fd, const Signals& signals, const Watchdog& watchdog) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);  // we died before the line above took effect
  if (!watchdog.guard_me()) fail(report_fd, Watchdog::kGone);  // never run unguarded
  if (spec.take_terminal) tcsetpgrp(STDIN_FILENO, getpid());
  if (!spec.pass_stdin) {
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, STDIN_FILENO) < 0) fail(report_fd, errno);
    close(null);
  }
  // A library may open descriptors without close-on-exec: only the ones listed cross exec.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  for (int fd : spec.inherit_fds) fcntl(fd, F_SETFD, 0);
  signals.restore_in_child();
  execvpe(argv[0], argv, envp);
  fail(report_fd, errno);
}

}  // namespace

std::vector<std::string> child_argv(const std::vector<std::string>& words, bool shell) {
  if (!shell) return words;
  std::string script;
  for (const auto& w : words) script += (script.empty() ? "" : " ") + w;
  const char* sh = std::getenv("SHELL");
  return {sh && *sh ? sh : "/bin/sh", "-c", script};
}

Spawned spawn_child(const ChildSpec& spec, const Signals& signals, const Watchdog& watchdog) {
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<std::string> env_strings = merged_environment(spec.env);
  auto argv = c_strings(argv_strings);
  auto envp = c_strings(env_strings);

  int report[2];
  if (pipe2(report, O_CLOEXEC) < 0) throw sys_error("pipe");
  UniqueFd report_read(report[0]), report_write(report[1]);
  pid_t parent = getpid();
  // vfork: the child borrows our memory until it execs, so starting it copies no page tables.
  // It runs only exec_child, which touches nothing but its arguments and system calls.
  pid_t pid = vfork();
  if (pid < 0) throw sys_error("cannot start the child");
  if (pid == 0) exec_child(spec, argv.data(), envp.data(), parent, report[1], signals, watchdog);

  // With vfork we resume only once the child has exec'd (or failed to): its process group and
  // its hold on the terminal exist already, and setting them again here could undo what the
  // child's own children did since (an interactive shell takes the terminal for itself).
  report_write.reset();
  Spawned s{pid, 0};
  while (read(report_read.get(), &s.exec_error, sizeof s.exec_error) < 0 && errno == EINTR) {
  }
  return s;
}

std::vector<int> passed_down_fds() {
  std::vector<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return fds;  // without /proc, none: a descriptor to pass on is rare, a leaked one is worse
  while (const dirent* entry = readdir(dir)) {
    int fd = std::atoi(entry->d_name);  // 0 for "." and ".."
    if (fd <= 2 || fd == dirfd(dir)) continue;
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) fds.push_back(fd);
  }
  closedir(dir);
  return fds;
}

}  // namespace lk
