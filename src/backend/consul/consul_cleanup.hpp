#pragma once
// Cleaning up after the child (or after a wait that was abandoned) within one shared budget, so
// that lock exits promptly even when the agent hangs: each step is retried on brief failures (no
// answer, 5xx) with short pauses while time is left, and what could not be done is said once,
// with what is left behind and when it goes by itself.
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "backend/errors.hpp"
#include "util/deadline.hpp"

namespace lk {

// One cleanup request: a healthy agent answers in milliseconds, so a hung one gets retried.
constexpr std::chrono::milliseconds kCleanupRequestTimeout{1000};

class Cleanup {
 public:
  explicit Cleanup(Deadline until) : until_(until) {}

  Deadline until() const { return until_; }
  // Runs `step` until it succeeds, fails for good (anything but no answer or 5xx), or `until`
  // (or this cleanup's own deadline, if earlier) passes. False when it did not succeed; the
  // failure is kept for report().
  bool run(const std::function<void()>& step, std::optional<Deadline> until = std::nullopt);
  const std::optional<std::string>& failure() const { return failure_; }
  // One line on stderr, once: what could not be done and `left`, what stays behind and why
  // that is no harm.
  void report(const std::string& left);

 private:
  Deadline until_;
  std::optional<std::string> failure_;
  bool reported_ = false;
};

}  // namespace lk
