#include "runner/children.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

pid_t scan_children(pid_t from, pid_t count, std::vector<pid_t>& found) {
  pid_t end = std::min(kPidMaxLimit + 1, from + count);
  for (pid_t pid = from; pid < end; ++pid)
    if (is_our_child(P_PID, pid)) found.push_back(pid);
  return end > kPidMaxLimit ? 0 : end;
}

std::vector<pid_t> scanned_children() {
  std::vector<pid_t> pids;
  for (pid_t next = 2; next != 0;) next = scan_children(next, kPidMaxLimit, pids);
  return pids;
}

bool have_children() { return is_our_child(P_ALL, 0); }

}  // namespace lk
