#include "backend/zookeeper/zk_backend.hpp"

#include "backend/zookeeper/zk_options.hpp"

#include <algorithm>

#include "backend/lease/follow_prefix.hpp"
#include "backend/zookeeper/zk_layout.hpp"
#include "backend/zookeeper/zk_lease.hpp"
#include "backend/zookeeper/zk_recipe.hpp"
#include "backend/zookeeper/zk_session.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

// Who a node's data says it is: lock's record, or a Curator client's; its czxid is the token.
HolderRecord holder_of_node(const std::string& prefix, const std::optional<ZkNode>& node) {
  auto owner = node ? parse_node_data(node->data) : std::nullopt;
  HolderRecord r = owner ? owner->record
                         : HolderRecord::named(prefix, node ? node->data : "",
                                               "a Curator client or another program");
  if (node) r.token = static_cast<std::uint64_t>(node->stat.czxid);
  return r;
}

// Who holds the prefix and who waits, as its nodes say; with `watch`, each node read (or the
// prefix's, while it does not exist) is left watched.
PrefixStatus read_nodes(ZkSession& session, const std::string& prefix, bool watch,
                        const Wake* wake) {
  std::string base = zk_path(prefix);
  PrefixStatus s;
  auto children = session.children(base, watch, kZkRequestTimeout, wake);
  // Only exists() leaves a watch on a node that is not there; one made meanwhile is read.
  if (!children && watch && session.exists(base, true, kZkRequestTimeout, wake))
    children = session.children(base, true, kZkRequestTimeout, wake);
  if (!children || children->empty()) return s;
  auto node = [&](const std::string& dir, const std::string& name) {
    return session.get(child_path(dir, name), watch, kZkRequestTimeout, wake);
  };
  auto list = [&](const std::string& dir, std::string_view kind) {
    return curator_sorted(
        session.children(dir, watch, kZkRequestTimeout, wake).value_or(std::vector<std::string>{}),
        kind);
  };
  // A semaphore's layout, unless its leases are an empty container left over from an earlier use
  // (the server reaps those only at its next container check).
  std::string leases = base + "/leases";
  std::vector<std::string> taken;
  if (std::find(children->begin(), children->end(), "leases") != children->end())
    taken = list(leases, kLeaseName);
  if (taken.empty()) {
    s.limit = 1;
    int rank = 0;
    for (const auto& name : curator_sorted(*children, kLockName))
      if (name != "locks" && name != "leases")
        (rank++ == 0 ? s.holders : s.waiters).push_back(holder_of_node(prefix, node(base, name)));
    if (s.holders.empty()) s.limit = 0;
    return s;
  }
  std::vector<HolderRecord> records;
  for (const auto& name : taken) {
    auto lease = node(leases, name);
    if (auto owner = lease ? parse_node_data(lease->data) : std::nullopt)
      s.limit = std::max(s.limit, owner->limit);
    records.push_back(holder_of_node(prefix, lease));
  }
  if (s.limit == 0) {  // Curator's alone, which store no limit: every lease holds
    s.limit_unknown = true;
    s.limit = static_cast<int>(records.size());
  }
  for (std::size_t i = 0; i < records.size(); ++i)
    (static_cast<int>(i) < s.limit ? s.holders : s.waiters).push_back(records[i]);
  // Behind them, those queued on the internal mutex; its first has its lease node counted above.
  std::string locks = base + "/locks";
  auto queue = list(locks, kLockName);
  for (std::size_t i = 1; i < queue.size(); ++i)
    s.waiters.push_back(holder_of_node(prefix, node(locks, queue[i])));
  if (s.holders.empty() && s.waiters.empty()) s = PrefixStatus{};
  return s;
}

// The session's own timeout says whether retries fit (zk_lease.hpp): no word here.
ZkBackendConfig prepared(const BackendConfig& config) {
  const auto& o = static_cast<const ZkOptions&>(config);
  return {o.connect, o.lease()};
}

}  // namespace

std::unique_ptr<Backend> make_zk_backend(const BackendConfig& config) {
  return std::make_unique<ZkBackend>(prepared(config));
}

PrefixStatus read_zk_status(const BackendConfig& config, const std::string& prefix,
                            const Wake* wake) {
  return ZkBackend(prepared(config)).read_status(prefix, wake);
}

std::unique_ptr<Hold> ZkBackend::acquire(const LockSpec& spec, Deadline deadline,
                                         const Interrupt& interrupt, const Queued& queued) {
  std::unique_ptr<ZkLease> lease;
  auto open_lease = [&](const Wake& wake) -> LeaseKeeper& {
    auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease.ttl);
    lease = std::make_unique<ZkLease>(config_.connect, ttl, config_.lease.kill_after,
                                      config_.lease.monitor_retry, deadline, &wake);
    return lease->keeper();
  };
  auto contend = [&](LeaseWait& wait) {
    return std::make_unique<ZkContention>(std::move(lease), wait, spec, config_.lease.value);
  };
  // The connect ends at -timeout's deadline at the latest (zk_lease.hpp).
  LeasedRecipe recipe{.open_lease = open_lease, .contend = contend, .deadline_ends_requests = true};
  return leased_acquire(spec, deadline, interrupt, queued, recipe);
}

PrefixStatus ZkBackend::read_status(const std::string& prefix, const Wake* wake) {
  auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease.ttl);
  ZkSession session(config_.connect, ttl, Deadline::after(ttl), wake);
  return read_nodes(session, prefix, false, wake);
}

// Reads with watches left on every node read, and waits for one to fire. A watch fires once, and
// a session event (a connection lost, or back) comes through the same descriptor: drained
// before the read, so that anything after it wakes the wait. The C client sets the watches again
// on the server it reconnects to; a session that expired takes them with it, and the next look
// makes a new one.
void ZkBackend::watch_status(const std::string& prefix, Deadline deadline,
                             const Interrupt& interrupt,
                             const std::function<void(const PrefixStatus&)>& show) {
  auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease.ttl);
  LeaseTiming timing = config_.lease.timing();
  std::unique_ptr<ZkSession> session;
  // The C client gives up on a silent server only two thirds of the session timeout in, later
  // than a hold may go without an answer: the probe looks up the root, as a hold's keeper looks
  // up its node, which also stands in for the client's own ping.
  auto probe = [&](std::chrono::milliseconds timeout, const Wake& wake) {
    if (!session)
      throw ZkUnreachable("ZooKeeper at " + printable(config_.connect) + ": no session yet");
    session->exists("/", false, timeout, &wake);
  };
  auto look = [&](const Wake& wake, const Heard& heard) {
    // No server within the budget is a failure to retry; one that refuses us (authentication)
    // is an error at once.
    if (!session)
      session = std::make_unique<ZkSession>(config_.connect, ttl,
                                            Deadline::after(timing.stop_after()), &wake);
    try {
      session->drain_events();
      PrefixStatus status = read_nodes(*session, prefix, true, &wake);
      heard();
      show(status);
    } catch (const ZkError& e) {
      if (e.code != ZSESSIONEXPIRED) throw;
      session.reset();
      throw ZkUnreachable(e.what());  // as worth retrying as no answer, on a new session
    }
    // Whatever event ends the wait, the next look (if any) reads again.
    while (!session->wait_event(wake, -1))
      if (!wake.keep_going()) throw Cancelled("stopped");
    return Look::changed;
  };
  try {
    follow_prefix(prefix, deadline, interrupt, timing, probe, look);
  } catch (const Error&) {
    if (session) abandon(std::move(session));  // the server may be what failed, and lock exits
    throw;
  }
}

}  // namespace lk
