#include "runner/children.hpp"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

namespace {

bool contains(const std::vector<pid_t>& pids, pid_t pid) {
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

}  // namespace

TEST_CASE("a child is found by /proc and by the scan, and the scan leaves its exit to be reaped") {
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  CHECK(lk::have_children());
  auto listed = lk::listed_children();
  REQUIRE(listed.has_value());
  CHECK(contains(*listed, child));
  std::vector<pid_t> found;
  CHECK(lk::scan_children(child - 1, 3, found) == child + 2);  // where the next slice starts
  CHECK(found == std::vector<pid_t>{child});

  kill(child, SIGKILL);
  siginfo_t info{};
  REQUIRE(waitid(P_PID, child, &info, WEXITED | WNOWAIT) == 0);  // a zombie now
  found.clear();
  lk::scan_children(child, 1, found);
  CHECK(found == std::vector<pid_t>{child});  // still ours, not reaped by the scan
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  found.clear();
  lk::scan_children(child, 1, found);
  CHECK(found.empty());
}

TEST_CASE("the scan ends past the largest pid there can be") {
  std::vector<pid_t> found;
  CHECK(lk::scan_children(4 * 1024 * 1024 - 10, 65536, found) == 0);
  CHECK(found.empty());
}
