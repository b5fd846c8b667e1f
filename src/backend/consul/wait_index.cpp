#include "backend/consul/wait_index.hpp"

#include <algorithm>

namespace lk {

using std::chrono::milliseconds;

milliseconds WaitIndex::answered(std::uint64_t index, std::uint64_t entries, milliseconds took) {
  std::uint64_t asked = index_;
  bool changed = !entries_ || *entries_ != entries;
  entries_ = entries;
  if (asked == 0) {  // a plain read: nothing to compare with yet
    index_ = std::max<std::uint64_t>(index, 1);
    return milliseconds(0);
  }
  if (index < asked) {  // backwards (a restored snapshot, a new leader): start over
    index_ = 0;
    return no_progress(took);
  }
  index_ = std::max<std::uint64_t>(index, 1);
  if (index > asked && changed) {
    next_pause_ = kFirstPause;
    return milliseconds(0);
  }
  return no_progress(took);
}

milliseconds WaitIndex::failed(std::optional<std::chrono::seconds> retry_after,
                               milliseconds retry_after_cap) {
  index_ = 0;
  entries_.reset();
  milliseconds pause = no_progress(milliseconds(0));
  if (retry_after) pause = std::max(pause, std::min<milliseconds>(*retry_after, retry_after_cap));
  return pause;
}

milliseconds WaitIndex::stalled() {
  index_ = 0;
  return no_progress(milliseconds(0));
}

milliseconds WaitIndex::no_progress(milliseconds took) {
  // A query that really blocked this long is no sign of a loop.
  if (took >= kMaxPause) {
    next_pause_ = kFirstPause;
    return milliseconds(0);
  }
  milliseconds bound = next_pause_;
  next_pause_ = std::min(next_pause_ * 2, kMaxPause);
  std::uniform_int_distribution<long> pick(bound.count() / 2, bound.count());
  return std::max(milliseconds(0), milliseconds(pick(random_)) - took);
}

std::uint64_t fingerprint(const std::vector<KvPair>& pairs) {
  // FNV-1a: only ever compared with the last one, within one process.
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&](std::string_view bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;  // a separator, so that ("ab","c") and ("a","bc") differ
    h *= 1099511628211ull;
  };
  auto mix_number = [&](std::uint64_t n) {
    mix(std::string_view(reinterpret_cast<const char*>(&n), sizeof n));
  };
  for (const KvPair& p : pairs) {
    mix(p.key);
    mix(p.session);
    mix_number(p.flags);
    mix_number(p.lock_index);
    mix_number(p.modify_index);
  }
  return h;
}

}  // namespace lk
