#include "backend/etcd/etcd_backend.hpp"

#include "backend/etcd/etcd_options.hpp"

#include "backend/etcd/etcd_layout.hpp"
#include "backend/etcd/etcd_prefix_view.hpp"
#include "backend/etcd/etcd_recipe.hpp"
#include "backend/lease/follow_prefix.hpp"
#include "util/base64.hpp"

namespace lk {

namespace {

// The lease's, with the word on retries that do not fit said when a run starts.
EtcdBackendConfig prepared(const BackendConfig& config, bool starting_a_run) {
  const auto& o = static_cast<const EtcdOptions&>(config);
  LeaseOptions lease = o.lease();
  if (starting_a_run) lease.timing().say_shortfall();
  return {o.client, lease};
}

}  // namespace

std::unique_ptr<Backend> make_etcd_backend(const BackendConfig& config) {
  return std::make_unique<EtcdBackend>(prepared(config, !config.status_only));
}

PrefixStatus read_etcd_status(const BackendConfig& config, const std::string& prefix,
                              const Wake* wake) {
  return EtcdBackend(prepared(config, false)).read_status(prefix, wake);
}

PrefixStatus EtcdBackend::read_status(const std::string& prefix, const Wake* wake) {
  EtcdClient client(config_.client);
  return status_of_queue(prefix, read_queue(client, prefix, 0, true, wake).contenders);
}

// One read, then one watch on the whole prefix from just after it, for as long as it lasts:
// each revision's events are applied and shown as they come. A watch that fails resumes from
// the last revision applied; one whose history was compacted away reads again.
void EtcdBackend::watch_status(const std::string& prefix, Deadline deadline,
                               const Interrupt& interrupt,
                               const std::function<void(const PrefixStatus&)>& show) {
  EtcdClient client(config_.client);
  EtcdPrefixView view(prefix);
  bool known = false;
  QueueRange range(prefix);
  // A quiet prefix costs a read where a hold sends a keep-alive, on a second connection: the
  // stream's carries nothing else, and opening the watch again to ask on it would cost etcd more.
  EtcdClient probe_client(config_.client);
  nlohmann::json count = {{"key", base64_encode(range.from)},
                          {"range_end", base64_encode(range.to)},
                          {"count_only", true}};
  auto probe = [&](std::chrono::milliseconds timeout, const Wake& wake) {
    probe_client.call("range", "/v3/kv/range", count, timeout, decode_header, &wake);
  };
  follow_prefix(
      prefix, deadline, interrupt, config_.lease.timing(), probe,
      [&](const Wake& wake, const Heard& heard) {
        if (!known) {
          Queue q = read_queue(client, prefix, 0, true, &wake);
          heard();
          view.reset(q.contenders, q.revision);
          known = true;
          show(view.status());
        }
        Look news = Look::quiet;
        client.watch(
            range.watch(view.revision() + 1),
            [&](const WatchMessage& m) {
              heard();
              for (std::size_t i = 0; i < m.events.size(); ++i) {
                view.apply(m.events[i]);
                if (i + 1 == m.events.size() ||
                    m.events[i + 1].kv.mod_revision != m.events[i].kv.mod_revision)
                  show(view.status());
                news = Look::changed;
              }
              if (m.canceled && m.compact_revision == 0) throw client.watch_refused(m);
              if (m.canceled) {  // compacted past what we know: the changes in between are gone
                known = false;
                news = Look::changed;
              }
              return !m.canceled;
            },
            wake);
        return news;
      });
}

std::unique_ptr<Hold> EtcdBackend::acquire(const LockSpec& spec, Deadline deadline,
                                           const Interrupt& interrupt, const Queued& queued) {
  std::unique_ptr<EtcdLease> lease;
  auto open_lease = [&](const Wake&) -> LeaseKeeper& {
    // Asked for until -timeout's deadline, its answer then waited for (etcd_lease.hpp): no wake
    // cuts the grant short.
    lease = std::make_unique<EtcdLease>(config_.client, config_.lease.timing(), deadline);
    return lease->keeper();
  };
  auto contend = [&](LeaseWait& wait) {
    return std::make_unique<EtcdContention>(config_, spec, std::move(lease), deadline, wait);
  };
  LeasedRecipe recipe{.open_lease = open_lease, .contend = contend, .deadline_ends_requests = true};
  return leased_acquire(spec, deadline, interrupt, queued, recipe);
}

}  // namespace lk
