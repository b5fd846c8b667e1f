#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backend/registry.hpp"

namespace lk {

// -check, -check-interval, -check-failures (runner/health_check.hpp).
struct CheckSpec {
  std::string command;  // empty: no checks
  std::chrono::nanoseconds interval = std::chrono::seconds(10);
  int failures = 3;  // in a row, that give the hold up
};

struct Options {
  int limit = 1;
  std::string name;  // session name; generated from the child when empty
  int monitor_retry = 3;
  std::chrono::nanoseconds timeout{0};  // 0 waits forever
  bool shell = true;
  bool pass_stdin = false;
  bool child_exit_code = false;
  bool preserve_status = false;
  int conflict_exit_code = 1;            // -timeout passed without the lock
  int lost_exit_code = 1;                // the lock was lost
  std::chrono::nanoseconds min_hold{0};  // the hold lasts at least this long from its start
  CheckSpec check;
  std::string
      metrics_file;  // node_exporter's textfile: what became of the run (runner/metrics_file.hpp)
  bool verbose = false;
  bool ready_when_queued = false;  // -ready=wait: systemd hears READY=1 once we are in line
  std::chrono::nanoseconds kill_after = std::chrono::seconds(5);
  std::string backend;            // a name the registry knows
  std::string backend_chosen_by;  // for messages: "-backend consul", "CONSUL_HTTP_ADDR is set"...
  // The chosen backend's own, read from its flags (registry.hpp); set once a backend is chosen.
  std::shared_ptr<const BackendConfig> backend_config;

  std::string prefix;
  std::vector<std::string> child;

  bool help = false;
  bool version = false;
  bool status = false;  // show who holds the prefix instead of running a child
  bool json = false;    // ... as JSON
  bool watch = false;   // ... now and at every change, until a stop signal or -timeout
};

// Parses the arguments after argv[0] as `consul lock` does (Go flag syntax), fills defaults from
// the environment and checks every value. Throws UsageError naming what is wrong.
Options parse_options(const std::vector<std::string>& args);

std::string usage_text();

// Every environment variable parse_options reads: the flags' own, those that select a backend,
// and those a backend reads for its defaults.
std::vector<std::string> option_variables();

}  // namespace lk
