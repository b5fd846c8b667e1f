#pragma once
#include <optional>
#include <string>

#include "cli/options.hpp"

namespace lk {

// How the child ended.
struct ChildEnd {
  bool signaled = false;
  int code = 0;  // exit status, or the signal number when signaled
  bool failed() const { return signaled || code != 0; }
  // As a shell tells it: 128+N when signal N ended the child.
  int shell_status() const { return signaled ? 128 + code : code; }
};

struct RunResult {
  ChildEnd child;
  int exec_error = 0;                    // errno when the child could not be started
  std::optional<std::string> lost;       // why the hold was lost, if it was
  bool unhealthy = false;                // ... given up, for -check's failures
  std::optional<std::string> not_run;    // why the child was never started, if it was not
  std::optional<std::string> unguarded;  // why the tree was killed without being told to stop
  bool ended_unstopped = false;          // the child ended before any stop began
  int stop_signal = 0;                   // a signal that told lock to stop, once the child ran
};

// Exit status of lock once the child ran (or could not) and the lock was released:
//   -lost-exit-code (1) if the hold was lost; 1 if the watchdog died while the tree ran;
//   with -preserve-status, the child's own status (128+N for signal N; 127 or 126, as a shell
//   would say, when it could not be started);
//   1 if the child could not be started (2 with -child-exit-code), its watchdog gone included;
//   with -child-exit-code, 2 when the child failed;
//   otherwise 0, whatever the child's status, as `consul lock` does.
// Every other error is an exception that main() turns into 1, but for -timeout's passing
// (AcquireTimeout), which is -conflict-exit-code.
int exit_code(const RunResult& result, const Options& options);

}  // namespace lk
