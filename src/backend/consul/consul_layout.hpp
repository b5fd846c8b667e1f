#pragma once
// Where Consul's own lock and semaphore recipes (api.Lock and api.Semaphore of its Go client)
// show in the KV store, exactly, so that `consul lock` and lock share a prefix (the wait loops
// themselves are in consul_recipe.hpp):
//
//   -n 1  the key <prefix>/.lock, flags kLockFlags, acquired with a session whose behaviour is
//         release; the holder is whoever's session holds it.
//   -n N  each contender acquires <prefix>/<session> (flags kSemaphoreFlags) with a session whose
//         behaviour is delete; <prefix>/.lock (same flags) holds {"Limit":N,"Holders":{...}}.
//         A contender prunes holders whose session no longer holds a contender key, and takes a
//         slot by check-and-set on .lock's ModifyIndex when fewer than N remain.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "backend/consul/consul_client.hpp"

namespace lk {

constexpr std::uint64_t kLockFlags = 0x2ddccbc058a50c18;       // api.LockFlagValue
constexpr std::uint64_t kSemaphoreFlags = 0xe0f69a2baa414de0;  // api.SemaphoreFlagValue

std::string lock_key(const std::string& prefix);  // <prefix>/.lock
// What a semaphore lists: everything under <prefix>/, and not <prefix>-other/ with it.
std::string semaphore_keys(const std::string& prefix);

// What .lock says of a semaphore; `pairs` is everything under the prefix.
struct SemaphoreState {
  int limit = 0;
  std::map<std::string, bool> holders;  // by session ID
  std::uint64_t modify_index = 0;       // of .lock; 0 while it does not exist
};
// Decodes .lock for a semaphore of `limit` and prunes dead holders, as api.Semaphore does.
// Throws Error with Consul's wording when .lock is a lock's or has another limit.
// Pure: `pairs` may be anything a server sent.
SemaphoreState read_semaphore(const std::vector<KvPair>& pairs, const std::string& prefix,
                              int limit);
// The Limit a semaphore's .lock states: 0 when it states none, or none that is a number of slots.
int semaphore_limit(const std::string& value);
std::string encode_semaphore(
    const SemaphoreState& s);  // {"Limit":N,"Holders":{...}}, as Go writes it

// Throws Error with Consul's wording when `pair` is not a lock's.
void check_lock_flags(const KvPair& pair);

}  // namespace lk
