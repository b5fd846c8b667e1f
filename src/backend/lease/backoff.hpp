#pragma once
// The floor under every loop that asks a server again after an attempt that made no progress (a
// watch that ended at once, a request that failed): waits that double from `first` to `cap`,
// each drawn from its upper half, so that a server answering at once cannot make us spin and
// many clients cut off together do not come back in step.
#include <chrono>
#include <optional>
#include <random>

namespace lk {

class Backoff {
 public:
  explicit Backoff(std::chrono::milliseconds first = std::chrono::milliseconds(50),
                   std::chrono::milliseconds cap = std::chrono::seconds(2))
      : first_(first), cap_(cap), next_(first) {}

  // The wait before the next attempt; the one after it doubles.
  std::chrono::milliseconds next() {
    auto bound = next_;
    next_ = std::min(next_ * 2, cap_);
    // Seeded at the first wait only: most runs never wait, and the seed costs cpuid calls, which
    // trap to the hypervisor on a VM.
    if (!random_) random_.emplace(std::random_device{}());
    std::uniform_int_distribution<long> pick(bound.count() / 2, bound.count());
    return std::chrono::milliseconds(pick(*random_));
  }
  // Progress was made: the next wait is short again.
  void reset() { next_ = first_; }
  std::chrono::milliseconds cap() const { return cap_; }

 private:
  std::chrono::milliseconds first_, cap_, next_;
  std::optional<std::minstd_rand> random_;
};

}  // namespace lk
