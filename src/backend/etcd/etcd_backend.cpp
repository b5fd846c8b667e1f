#include "backend/etcd/etcd_backend.hpp"

#include "backend/etcd/etcd_layout.hpp"
#include "backend/etcd/etcd_prefix_view.hpp"
#include "backend/etcd/etcd_recipe.hpp"
#include "backend/lease/follow_prefix.hpp"
#include "util/printable.hpp"

namespace lk {

PrefixStatus EtcdBackend::status(const std::string& prefix, const Wake* wake) {
  EtcdClient client(config_.client);
  return status_of(prefix, read_queue(client, prefix, 0, true, wake).contenders);
}

// One read, then one watch on the whole prefix from just after it, for as long as it lasts:
// each revision's events are applied and shown as they come. A watch that fails resumes from
// the last revision applied; one whose history was compacted away reads again.
void EtcdBackend::watch_status(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                               const std::function<void(const PrefixStatus&)>& show) {
  EtcdClient client(config_.client);
  EtcdPrefixView view(prefix);
  bool known = false;
  QueueRange range(prefix);
  follow_prefix(prefix, deadline, interrupt, config_.lease.timing(), [&](const Wake& wake) {
    if (!known) {
      Queue q = read_queue(client, prefix, 0, true, &wake);
      view.reset(q.contenders, q.revision);
      known = true;
      show(view.status());
    }
    Look news = Look::quiet;
    client.watch(range.watch(view.revision() + 1), [&](const WatchMessage& m) {
      for (std::size_t i = 0; i < m.events.size(); ++i) {
        view.apply(m.events[i]);
        if (i + 1 == m.events.size() || m.events[i + 1].kv.mod_revision != m.events[i].kv.mod_revision)
          show(view.status());
        news = Look::changed;
      }
      if (m.canceled && m.compact_revision == 0)
        throw client.watch_refused(m);
      if (m.canceled) {  // compacted past what we know: the changes in between are gone
        known = false;
        news = Look::changed;
      }
      return !m.canceled;
    }, wake);
    return news;
  });
}

std::unique_ptr<Hold> EtcdBackend::acquire(const LockSpec& spec, Deadline deadline,
                                           const Interrupt& interrupt) {
  try {
    return mutex_lock(config_, spec, deadline, interrupt);
  } catch (const NetworkError&) {
    // A request cut short by -timeout is the timeout, not a fault of etcd's.
    if (deadline.passed()) throw AcquireTimeout("timed out waiting for prefix '" + printable(spec.prefix) + "'");
    throw;
  }
}

}  // namespace lk
