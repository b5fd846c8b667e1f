#include "util/log.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>

namespace lk {
namespace {
bool g_verbose = false;
}

void set_verbose(bool on) { g_verbose = on; }
bool verbose_enabled() { return g_verbose; }

void write_log_line(std::string_view message) {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc;
  gmtime_r(&secs, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &utc);
  // One write per line, so lines from several processes on one terminal do not interleave.
  std::string line = fmt::format("{}.{:03}Z lock[{}]: {}\n", stamp, ms, getpid(), message);
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace lk
