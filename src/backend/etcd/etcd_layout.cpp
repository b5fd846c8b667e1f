#include "backend/etcd/etcd_layout.hpp"

#include <fmt/format.h>

#include <charconv>

#include "util/base64.hpp"
#include "util/printable.hpp"

namespace lk {

std::string contender_key(const std::string& prefix, std::int64_t lease, int limit) {
  if (limit == 1) return fmt::format("{}/{:x}", prefix, lease);
  return fmt::format("{}/sem{}-{:x}", prefix, limit, lease);
}

HolderRecord holder_of_contender(const std::string& prefix, const Contender& c) {
  HolderRecord r = HolderRecord::from_value(prefix, c.value, c.key);  // etcdctl's are empty
  r.token = static_cast<std::uint64_t>(c.create_revision);
  return r;
}

nlohmann::json put_of(const Contender& c, std::int64_t lease_id) {
  return {{"key", base64_encode(c.key)},
          {"value", base64_encode(c.value)},
          {"lease", std::to_string(lease_id)}};
}

std::optional<Contender> parse_contender(const std::string& prefix, const KeyValue& kv) {
  std::string_view name(kv.key);
  if (!name.starts_with(prefix + "/")) return std::nullopt;
  name.remove_prefix(prefix.size() + 1);
  if (name.find('/') != std::string_view::npos) return std::nullopt;
  Contender c{kv.key, kv.create_revision, 1, kv.value};
  if (name.starts_with("sem")) {
    int limit = 0;
    auto [end, ec] = std::from_chars(name.data() + 3, name.data() + name.size(), limit);
    if (ec == std::errc() && limit > 1 && end < name.data() + name.size() && *end == '-')
      c.limit = limit;
  }
  return c;
}

Position position_in(const std::vector<Contender>& queue, std::int64_t my_revision, int my_limit) {
  Position p;
  for (const Contender& c : queue) {
    if (c.create_revision >= my_revision) break;
    if (c.limit != my_limit) {
      if (my_limit == 1) throw not_lock_use(printable(c.key) + " is a semaphore's");
      if (c.limit == 1) throw not_semaphore_use(printable(c.key) + " is a lock's");
      throw limit_conflict(c.limit, my_limit);
    }
    ++p.ahead;
    p.predecessor = c;
  }
  return p;
}

}  // namespace lk
