#pragma once
// The queue of contenders under an etcd prefix, and where one contender stands in it (the wait
// for a turn in it is etcd_recipe.hpp).
//
// Every contender puts one key under "<prefix>/", attached to its lease; create revisions order
// the queue. A lock (-n 1) uses etcd's own mutex layout, "<prefix>/<lease ID in hex>", so that
// `etcdctl lock` and lock share the queue; a semaphore of N slots uses "<prefix>/sem<N>-<lease>",
// so its limit is stored under the prefix, in every contender's key.
//
// Safety: a contender holds once fewer than N keys ahead of it (by create revision) remain.
// Create revisions only grow, so no key can appear ahead of one that exists: the count ahead of
// a contender only falls. Hence at any revision the holders are among the first N keys, at most
// N of them. A contender that finds ahead of it a key of the other kind or of another limit
// backs out (the later one always sees the earlier one before it holds, so of any two that
// disagree, one backs out before holding). etcdctl, which does not check, treats every key as a
// lock, and so waits until it is first: never beside a semaphore's holders.
//
// Reading: a contender reads only its own key and the N + 1 just ahead of it (etcd's mutex reads
// the one key just ahead), newest first, not the whole queue: its requests and etcd's replies
// stay the same size however long the queue (etcd still looks through the whole range to sort
// it). That is all a turn needs: fewer than N contenders ahead means it holds, exactly N that it
// is first in line, more that it waits on the key just ahead. A read that came back full with
// keys that are no contender's (a longer prefix's, "<prefix>/a/b") may hide contenders further
// back, and is made again whole. So a contender holds only after a read that was not full, which
// then saw every key ahead of it, each checked (every key carries its kind and limit in its
// name). A key of the other kind further back in the line is met later, when it comes within
// reach; never after holding beside it.
//
// Waking: a lock waits for the key just ahead of it to go, as etcd's mutex does. In a semaphore
// the first waiter (exactly N ahead) waits for any key ahead to go; every other waiter waits
// only on the key just ahead of it, which it sees change either by going or, once that one
// holds a slot, by being written again. So each release wakes one waiter, not the queue.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/etcd/etcd_client.hpp"
#include "backend/holder_record.hpp"

namespace lk {

struct Contender {
  std::string key;
  std::int64_t create_revision = 0;
  int limit = 1;  // 1 for locks, including keys of etcdctl lock and keys we cannot read
  std::string value;
};

std::string contender_key(const std::string& prefix, std::int64_t lease, int limit);
// nullopt for keys below "<prefix>/" that belong to a longer prefix ("<prefix>/a/b"), and for
// keys not below it at all.
std::optional<Contender> parse_contender(const std::string& prefix, const KeyValue& kv);

// Who a contender is, as its key's value says (a record of lock's, or etcdctl's empty value), with
// its create revision as the fencing token.
HolderRecord holder_of_contender(const std::string& prefix, const Contender& c);

// The put of a contender's key, with its value, on its lease.
nlohmann::json put_of(const Contender& c, std::int64_t lease_id);

struct Position {
  int ahead = 0;                         // contenders ahead of us
  std::optional<Contender> predecessor;  // the one just ahead
};

// Where the contender with `my_revision` stands among `queue` (sorted by create revision).
// Throws Error, in Consul's wording, when one ahead of it disagrees on the kind or the limit.
Position position_in(const std::vector<Contender>& queue, std::int64_t my_revision, int my_limit);

}  // namespace lk
