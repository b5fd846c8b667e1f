#pragma once
// Where the next blocking query waits, and how long to pause before sending it, following
// Consul's own advice on blocking queries: reset the index to 0 when it goes backwards, never
// wait on 0 once a reply came, and rate-limit queries that come back without anything having
// changed. A query that answers at once with an unchanged, backwards or zero index, or with a
// higher index but the same entries, is no progress: the pauses before the next one double from
// 50 ms up to 1 s, each drawn from its upper half, so that a server that does not block cannot
// make us spin, and many clients cut off together do not come back in step. Real progress, or a
// query that blocked for a while, brings the pause back to nothing.
//
// Pure bookkeeping on given durations, so that any sequence of replies can be replayed in a test.
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "backend/consul/consul_reply.hpp"

namespace lk {

class WaitIndex {
 public:
  static constexpr std::chrono::milliseconds kFirstPause{50};
  static constexpr std::chrono::milliseconds kMaxPause{1000};

  explicit WaitIndex(std::uint32_t seed = std::random_device{}()) : random_(seed) {}

  // The index the next query waits on; 0 means a plain read that answers at once.
  std::uint64_t index() const { return index_; }

  // The query that asked with index() answered, after `took`, with X-Consul-Index `index` and
  // entries whose fingerprint() is `entries`. Returns the pause before the next query.
  std::chrono::milliseconds answered(std::uint64_t index, std::uint64_t entries,
                                     std::chrono::milliseconds took);
  // A query failed (no answer, 5xx, a garbled reply): the next one reads afresh after the pause
  // returned, which honours the server's Retry-After up to `retry_after_cap`.
  std::chrono::milliseconds failed(
      std::optional<std::chrono::seconds> retry_after = std::nullopt,
      std::chrono::milliseconds retry_after_cap = std::chrono::seconds(5));
  // A step of the recipe found nothing had moved after all (a check-and-set that lost, an
  // acquire that did not take): the next query reads afresh after the pause returned.
  std::chrono::milliseconds stalled();

 private:
  std::chrono::milliseconds no_progress(std::chrono::milliseconds took);

  std::uint64_t index_ = 0;
  std::optional<std::uint64_t> entries_;
  std::chrono::milliseconds next_pause_ = kFirstPause;
  std::minstd_rand random_;
};

// What matters of a read for the recipes: each entry's key, holder and indexes.
std::uint64_t fingerprint(const std::vector<KvPair>& pairs);

}  // namespace lk
