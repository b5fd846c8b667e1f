#include "runner/metrics_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/printable.hpp"
#include "util/unique_fd.hpp"
#include "util/untrusted_file.hpp"

namespace lk {
namespace {

constexpr const char* kOutcomes[] = {"running", "ran",         "conflict", "lost",
                                     "error",   "interrupted", "unhealthy"};
constexpr const char* kLastSuccess = "lock_last_success_timestamp_seconds";
// Enough for any file lock writes, whatever its prefix; a larger one is not ours to carry over.
constexpr std::size_t kMaxRead = 1 << 20;

// A label value as the exposition format quotes it.
std::string label_value(std::string_view text) {
  std::string shown = valid_utf8(text) ? std::string(text) : printable(text, text.size() * 4);
  std::string out;
  for (char c : shown) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

std::string labels(const RunFacts& run) {
  return "prefix=\"" + label_value(run.prefix) + "\",backend=\"" + label_value(run.backend) + "\"";
}

void gauge(std::string& out, const char* name, const char* help, const std::string& labels,
           double value) {
  out += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0}{{{2}}} {3:.3f}\n", name, help, labels,
                     value);
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void warn(const std::string& what) {
  fmt::print(stderr, "lock: warning: -metrics-file: {}\n", what);
}

// What lock finds at the path decides what it does there. A regular file is what lock writes:
// its last success is carried over when it is small enough to be one of lock's files. A FIFO, a
// symbolic link or a socket is what a neighbour who can write to the directory plants, to hang
// lock or to have it read a file they cannot: nothing is read from it, and it is replaced, since
// rename(2) replaces the name itself, never what a link points to; monitoring then goes on, its
// last success at 0 so that the alert on its age fires rather than the series going quiet. A
// directory or a device is left as it is: rename(2) cannot replace a directory, and only root
// can make a device, so one there is the operator's own (/dev/null as a script's default), which
// replacing would break. Either way a warning says so. What changes between these checks and the
// rename is harmless: the rename writes through nothing, and no neighbour can plant a device.
void check_replaceable(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 &&
      (S_ISDIR(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)))
    throw Error(printable(path) + " is a directory or a device; left as it is");
}

// The text of the previous version, read only if it is a regular file of at most kMaxRead bytes;
// "" when there is none. Throws Error saying why it cannot be read.
std::string previous_text(const std::string& path) {
  UniqueFd fd = open_untrusted_file(AT_FDCWD, path.c_str(), O_RDONLY);
  if (!fd && errno == ENOENT) return "";
  if (!fd && errno == ENOTSUP)
    throw Error(printable(path) + " is not a regular file (a link, FIFO or socket)");
  auto text = fd ? read_untrusted_file(fd.get(), kMaxRead) : std::nullopt;
  if (!text) throw sys_error("cannot read " + printable(path));
  return *text;
}

// The last success that the previous version records, or 0 with a warning when it cannot be read.
double carried_over_success(const std::string& path, const RunFacts& run) {
  try {
    return last_success_in(previous_text(path), run, unix_now());
  } catch (const Error& e) {
    warn(std::string(e.what()) + "; no last success carried over");
    return 0;
  }
}

}  // namespace

std::string metrics_text(const RunFacts& run) {
  std::string l = labels(run), out;
  out +=
      "# HELP lock_run_outcome How the latest run on the prefix went: 1 for its outcome, 0 for "
      "the others (running: it holds the lock now).\n# TYPE lock_run_outcome gauge\n";
  for (std::size_t i = 0; i < std::size(kOutcomes); ++i)
    out += fmt::format("lock_run_outcome{{{},outcome=\"{}\"}} {}\n", l, kOutcomes[i],
                       static_cast<std::size_t>(run.outcome) == i ? 1 : 0);
  gauge(out, "lock_run_wait_seconds",
        "Seconds the latest run waited for the lock, until it held it or gave up.", l, run.waited);
  gauge(out, "lock_run_held_seconds",
        "Seconds the latest run held the lock, -min-hold included (0 until it ends).", l, run.held);
  if (run.child_status)
    gauge(out, "lock_run_child_exit_status",
          "Exit status of the latest run's child, 128+N when signal N ended it.", l,
          *run.child_status);
  gauge(out, "lock_run_start_timestamp_seconds",
        "When the latest run started, in seconds since the Unix epoch.", l, run.started);
  if (run.ended)
    gauge(out, "lock_run_end_timestamp_seconds",
          "When the latest run ended, in seconds since the Unix epoch.", l, *run.ended);
  gauge(out, kLastSuccess,
        "When a run last ended with its child exiting 0, in seconds since the Unix epoch, kept "
        "across the runs since; 0 if none has.",
        l, run.last_success);
  return out;
}

double last_success_in(std::string_view text, const RunFacts& run, double now) {
  std::string series = std::string(kLastSuccess) + "{" + labels(run) + "} ";
  for (std::size_t at = 0; at < text.size();) {
    auto end = text.find('\n', at);
    auto line = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? text.size() : end + 1;
    if (!line.starts_with(series)) continue;
    auto number = line.substr(series.size());
    double value = 0;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec == std::errc() && ptr == number.data() + number.size() && value > 0 && value <= now)
      return value;
  }
  return 0;
}

void replace_file(const std::string& path, std::string_view text) {
  auto failed = [&] { return sys_error("cannot write " + printable(path)); };
  // Made with O_EXCL under a random name: whatever someone planted beside `path` is neither
  // written through nor in the way.
  std::string temp = path + ".XXXXXX.tmp";
  UniqueFd fd(mkostemps(temp.data(), 4, O_CLOEXEC));
  if (!fd) throw failed();
  struct RemoveOnThrow {
    const std::string& temp;
    bool done = false;
    ~RemoveOnThrow() {
      if (!done) unlink(temp.c_str());
    }
  } guard{temp};
  if (fchmod(fd.get(), 0644) != 0) throw failed();
  for (std::size_t at = 0; at < text.size();) {
    ssize_t n = write(fd.get(), text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw failed();
    at += static_cast<std::size_t>(n);
  }
  // On disk before the rename: after a crash, the old file or the new one, never an empty one.
  if (fsync(fd.get()) != 0 || close(fd.release()) != 0 || rename(temp.c_str(), path.c_str()) != 0)
    throw failed();
  guard.done = true;
}

MetricsFile::MetricsFile(const Options& o) : path_(o.metrics_file), start_(Clock::now()) {
  run_.prefix = o.prefix;
  run_.backend = o.backend;
  run_.started = unix_now();
}

void MetricsFile::acquired(Clock::time_point when) {
  acquired_ = when;
  run_.waited = seconds(*acquired_ - start_);
  write();
}

void MetricsFile::ended(Outcome outcome, std::optional<int> child_status) {
  if (run_.ended) return;  // told once; a failure after that changes nothing
  auto now = Clock::now();
  run_.outcome = outcome;
  run_.child_status = child_status;
  run_.waited = seconds((acquired_ ? *acquired_ : now) - start_);
  run_.held = acquired_ ? seconds(now - *acquired_) : 0;
  run_.ended = unix_now();
  write();
}

void MetricsFile::write() {
  if (path_.empty()) return;
  try {
    check_replaceable(path_);
    run_.last_success = carried_over_success(path_, run_);
    if (run_.outcome == Outcome::ran && run_.child_status == 0) run_.last_success = *run_.ended;
    replace_file(path_, metrics_text(run_));
  } catch (const Error& e) {
    warn(e.what());
  }
}

}  // namespace lk
