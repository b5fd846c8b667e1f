#include "runner/children.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace lk {
namespace {

// The kernel's largest pid_max (PID_MAX_LIMIT on 64-bit); the actual one is in /proc.
constexpr pid_t kPidMaxLimit = 4 * 1024 * 1024;

// Asks without collecting anything: WNOWAIT leaves every state change for reap() to take.
bool is_our_child(idtype_t type, pid_t pid) {
  siginfo_t info{};
  return waitid(type, pid, &info, WEXITED | WSTOPPED | WCONTINUED | WNOHANG | WNOWAIT) == 0;
}

}  // namespace

std::optional<std::vector<pid_t>> listed_children() {
  std::ifstream list("/proc/self/task/" + std::to_string(getpid()) + "/children");
  if (!list) return std::nullopt;
  std::vector<pid_t> pids;
  for (pid_t pid; list >> pid;) pids.push_back(pid);
  return pids;
}

std::vector<pid_t> scanned_children() {
  std::vector<pid_t> pids;
  for (pid_t pid = 2; pid <= kPidMaxLimit; ++pid)
    if (is_our_child(P_PID, pid)) pids.push_back(pid);
  return pids;
}

bool have_children() { return is_our_child(P_ALL, 0); }

}  // namespace lk
