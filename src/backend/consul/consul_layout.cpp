#include "backend/consul/consul_layout.hpp"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

namespace lk {

std::string lock_key(const std::string& prefix) { return prefix + "/.lock"; }

std::string semaphore_keys(const std::string& prefix) { return prefix + "/"; }

namespace {

// Go decodes Limit into an int: a whole number in range, or no semaphore of ours.
std::optional<int> limit_of(const nlohmann::json& j) {
  auto it = j.find("Limit");
  if (it == j.end() || it->is_null()) return 0;
  if (!it->is_number_integer()) return std::nullopt;
  auto n = it->get<std::int64_t>();
  if (n < 0 || n > std::numeric_limits<int>::max()) return std::nullopt;
  return static_cast<int>(n);
}

}  // namespace

int semaphore_limit(const std::string& value) {
  auto j = nlohmann::json::parse(value, nullptr, false);
  if (!j.is_object()) return 0;
  return limit_of(j).value_or(0);
}

void check_lock_flags(const KvPair& pair) {
  if (pair.flags != kLockFlags) throw not_lock_use();
}

SemaphoreState read_semaphore(const std::vector<KvPair>& pairs, const std::string& prefix,
                              int limit) {
  SemaphoreState s{limit, {}, 0};
  const KvPair* lock = nullptr;
  for (const KvPair& p : pairs)
    if (p.key == lock_key(prefix)) lock = &p;
  if (lock) {
    if (lock->flags != kSemaphoreFlags) throw not_semaphore_use();
    s.modify_index = lock->modify_index;
    if (!lock->value.empty()) {
      auto j = nlohmann::json::parse(lock->value, nullptr, false);
      if (!j.is_object()) throw not_semaphore_use();
      auto stated = limit_of(j);
      if (!stated) throw not_semaphore_use();
      s.limit = *stated;
      auto holders = j.find("Holders");
      if (holders != j.end() && holders->is_object())
        for (auto it = holders->begin(); it != holders->end(); ++it)
          if (it->is_boolean() && it->get<bool>()) s.holders[it.key()] = true;
    }
  }
  if (s.limit != limit) throw limit_conflict(s.limit, limit);
  // A holder is alive while its session holds a key under the prefix (its contender key).
  std::erase_if(s.holders, [&](const auto& h) {
    for (const KvPair& p : pairs)
      if (p.session == h.first) return false;
    return true;
  });
  return s;
}

std::string encode_semaphore(const SemaphoreState& s) {
  nlohmann::ordered_json j;  // Go writes the struct's fields in order: Limit, then Holders
  j["Limit"] = s.limit;
  j["Holders"] = nlohmann::ordered_json::object();
  for (const auto& [session, held] : s.holders)
    j["Holders"][session] = held;  // sorted, as Go's map
  return j.dump();
}

}  // namespace lk
