#include "backend/etcd/etcd_prefix_view.hpp"

#include <algorithm>
#include <tuple>

namespace lk {

namespace {

// The first `limit` of `by_revision` hold, the others wait.
PrefixStatus ranked(int limit, std::vector<HolderRecord> by_revision) {
  PrefixStatus s;
  s.limit = limit;
  for (std::size_t rank = 0; rank < by_revision.size(); ++rank)
    (rank < static_cast<std::size_t>(limit) ? s.holders : s.waiters)
        .push_back(std::move(by_revision[rank]));
  return s;
}

}  // namespace

PrefixStatus status_of_queue(const std::string& prefix, const std::vector<Contender>& by_revision) {
  if (by_revision.empty()) return {};
  std::vector<HolderRecord> records;
  for (const Contender& c : by_revision) records.push_back(holder_of_contender(prefix, c));
  return ranked(by_revision.front().limit, std::move(records));
}

void EtcdPrefixView::reset(const std::vector<Contender>& contenders, std::int64_t revision) {
  contenders_.clear();
  for (const Contender& c : contenders) contenders_[c.key] = {c, holder_of_contender(prefix_, c)};
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
    contenders_[c->key] = {*c, holder_of_contender(prefix_, *c)};
  }
}

PrefixStatus EtcdPrefixView::status() const {
  std::vector<const Entry*> queue;
  for (const auto& [key, entry] : contenders_) queue.push_back(&entry);
  std::sort(queue.begin(), queue.end(), [](const Entry* a, const Entry* b) {
    const Contender &x = a->contender, &y = b->contender;
    return std::tie(x.create_revision, x.key) <
           std::tie(y.create_revision, y.key);  // etcd's revisions are unique
  });
  if (queue.empty()) return {};
  std::vector<HolderRecord> records;
  for (const Entry* e : queue) records.push_back(e->record);
  return ranked(queue.front()->contender.limit, std::move(records));
}

}  // namespace lk
