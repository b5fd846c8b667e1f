#include "backend/etcd/etcd_prefix_view.hpp"

#include <algorithm>
#include <tuple>

namespace lk {

PrefixStatus status_of(const std::string& prefix, const std::vector<Contender>& by_revision) {
  PrefixStatus s;
  if (by_revision.empty()) return s;
  s.limit = by_revision.front().limit;
  int rank = 0;
  for (const Contender& c : by_revision)
    (rank++ < s.limit ? s.holders : s.waiters).push_back(record_of(prefix, c));
  return s;
}

void EtcdPrefixView::reset(const std::vector<Contender>& contenders, std::int64_t revision) {
  contenders_.clear();
  for (const Contender& c : contenders) contenders_[c.key] = c;
  read_at_ = revision_ = revision;
}

void EtcdPrefixView::apply(const WatchEvent& event) {
  // A watch starts just after what is known, so only a server that repeats itself sends what
  // the read already saw; it must not undo a later change. The events of one transaction share
  // its revision, and come in one message.
  if (event.kv.mod_revision <= read_at_) return;
  revision_ = std::max(revision_, event.kv.mod_revision);
  if (event.deleted) {
    contenders_.erase(event.kv.key);
  } else if (auto c = parse_contender(prefix_, event.kv)) {
    contenders_[c->key] = std::move(*c);
  }
}

PrefixStatus EtcdPrefixView::status() const {
  std::vector<Contender> queue;
  for (const auto& [key, c] : contenders_) queue.push_back(c);
  std::sort(queue.begin(), queue.end(), [](const Contender& a, const Contender& b) {
    return std::tie(a.create_revision, a.key) < std::tie(b.create_revision, b.key);  // etcd's revisions are unique
  });
  return status_of(prefix_, queue);
}

}  // namespace lk
