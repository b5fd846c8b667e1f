#pragma once
// -metrics-file: what became of each run, in node_exporter's textfile-collector format, so that
// monitoring can tell a skipped cron run from a lost lock, and alert on "no success for 25 h" even
// when every run since was skipped. The file is replaced whole (a temporary file in the same
// directory, then a rename) when the lock is acquired and when lock exits, whatever the outcome;
// a reader sees the old file or the new one, never part of one.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "cli/options.hpp"
#include "util/deadline.hpp"

namespace lk {

enum class Outcome { running, ran, conflict, lost, error, interrupted, unhealthy };

// One run as the file tells it. Times are seconds since the Unix epoch.
struct RunFacts {
  std::string prefix, backend;
  Outcome outcome = Outcome::running;
  double started = 0;
  double waited = 0, held = 0;      // seconds
  std::optional<int> child_status;  // as a shell tells it: 128+N when signal N ended the child
  std::optional<double> ended;
  double last_success = 0;  // the child's last exit 0 in a run that kept the lock; 0: none
};

// The file's whole text: each series with its HELP and TYPE, labelled with the prefix and the
// backend. A prefix that is not UTF-8 is labelled as lock's messages print it (\xff).
std::string metrics_text(const RunFacts& run);

// The last success that `text`, an earlier version of the file, records for `run`'s prefix and
// backend; 0 when it records none. Another prefix's, a malformed value, and one outside
// [0, `now`] are none: a success from the future would keep the alert on its age quiet for good.
double last_success_in(std::string_view text, const RunFacts& run, double now);

// Replaces `path` with `text`: written to a temporary file beside it, under a name no one can
// guess (`path`.XXXXXX.tmp) and readable by all (0644, for node_exporter's user), flushed to
// disk, renamed over `path`. Throws Error ("cannot write <path>: <why>"); the temporary file is
// removed then.
void replace_file(const std::string& path, std::string_view text);

// The file of one run, written at acquisition and at the end. The previous version is read as an
// untrusted file (util/untrusted_file.hpp): the directory may be writable by others. A file that
// cannot be read or written is a warning on stderr, not a failure: the job matters more than its
// report.
class MetricsFile {
 public:
  explicit MetricsFile(const Options& options);  // writes nothing without -metrics-file
  void acquired(Clock::time_point when);
  void ended(Outcome outcome, std::optional<int> child_status = std::nullopt);

 private:
  void write();

  std::string path_;
  RunFacts run_;
  Clock::time_point start_;
  std::optional<Clock::time_point> acquired_;
};

}  // namespace lk
