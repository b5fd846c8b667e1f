#include "runner/metrics_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/printable.hpp"
#include "util/unique_fd.hpp"

namespace lk {
namespace {

constexpr const char* kOutcomes[] = {"running", "ran", "conflict", "lost", "error", "interrupted"};
constexpr const char* kLastSuccess = "lock_last_success_timestamp_seconds";
// Enough for any file lock writes, whatever its prefix; a larger one is not ours to carry over.
constexpr std::streamsize kMaxRead = 1 << 20;

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

}  // namespace

std::string metrics_text(const RunFacts& run) {
  std::string l = labels(run), out;
  out += "# HELP lock_run_outcome How the latest run on the prefix went: 1 for its outcome, 0 for "
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

double last_success_in(std::string_view text, const RunFacts& run) {
  std::string series = std::string(kLastSuccess) + "{" + labels(run) + "} ";
  for (std::size_t at = 0; at < text.size();) {
    auto end = text.find('\n', at);
    auto line = text.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    at = end == std::string_view::npos ? text.size() : end + 1;
    if (!line.starts_with(series)) continue;
    auto number = line.substr(series.size());
    double value = 0;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec == std::errc() && ptr == number.data() + number.size() && std::isfinite(value) &&
        value > 0)
      return value;
  }
  return 0;
}

void replace_file(const std::string& path, std::string_view text) {
  std::string temp = fmt::format("{}.{}.tmp", path, getpid());
  auto failed = [&] { return sys_error("cannot write " + printable(path)); };
  UniqueFd fd(open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) throw failed();
  struct RemoveOnThrow {
    const std::string& temp;
    bool done = false;
    ~RemoveOnThrow() {
      if (!done) unlink(temp.c_str());
    }
  } guard{temp};
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
    std::ifstream previous(path_, std::ios::binary);
    std::string text(static_cast<std::size_t>(kMaxRead), '\0');
    previous.read(text.data(), kMaxRead);
    text.resize(static_cast<std::size_t>(previous.gcount()));
    run_.last_success = last_success_in(text, run_);
    if (run_.outcome == Outcome::ran && run_.child_status == 0) run_.last_success = *run_.ended;
    replace_file(path_, metrics_text(run_));
  } catch (const Error& e) {
    fmt::print(stderr, "lock: warning: -metrics-file: {}\n", e.what());
  }
}

}  // namespace lk
