#include "backend/consul/consul_backend.hpp"

#include "backend/consul/consul_layout.hpp"
#include "backend/consul/consul_options.hpp"
#include "backend/consul/consul_recipe.hpp"
#include "backend/consul/consul_token.hpp"
#include "backend/consul/wait_index.hpp"
#include "backend/lease/follow_prefix.hpp"

namespace lk {
namespace {

// Who a key's value says holds it or waits: lock's record, or another client's value, named by
// its session.
HolderRecord holder_of_key(const std::string& prefix, const KvPair& pair) {
  return HolderRecord::from_value(prefix, pair.value, "session " + pair.session);
}

// Who holds the prefix and who waits, as its keys say.
PrefixStatus status_of_keys(const std::string& prefix, const std::vector<KvPair>& pairs) {
  PrefixStatus s;
  const KvPair* lock = nullptr;
  for (const KvPair& p : pairs)
    if (p.key == lock_key(prefix)) lock = &p;
  if (!lock) return s;
  if (lock->flags == kLockFlags) {
    s.limit = 1;
    if (!lock->session.empty()) {
      HolderRecord h = holder_of_key(prefix, *lock);
      h.token = lock->modify_index;  // see ConsulContention::lock()
      s.holders.push_back(h);
    }
    return s;
  }
  s.limit = semaphore_limit(lock->value);
  SemaphoreState state = read_semaphore(pairs, prefix, s.limit);
  for (const KvPair& p : pairs) {
    if (p.key == lock_key(prefix) || p.session.empty()) continue;
    HolderRecord h = holder_of_key(prefix, p);
    (state.holders.contains(p.session) ? s.holders : s.waiters).push_back(h);
  }
  return s;
}

// The client's configuration with its token read; the lease's, with the word on retries that do
// not fit said when a run starts.
ConsulBackendConfig prepared(const BackendConfig& config, bool starting_a_run) {
  const auto& o = static_cast<const ConsulOptions&>(config);
  ConsulConfig client = o.client;
  client.token = consul_token(o.client.token, o.token_file);
  LeaseOptions lease = o.lease();
  if (starting_a_run) lease.timing().say_shortfall();
  return {client, lease, o.lock_delay, o.session_checks};
}

}  // namespace

std::unique_ptr<Backend> make_consul_backend(const BackendConfig& config) {
  return std::make_unique<ConsulBackend>(prepared(config, !config.status_only));
}

PrefixStatus read_consul_status(const BackendConfig& config, const std::string& prefix,
                                const Wake* wake) {
  return ConsulBackend(prepared(config, false)).read_status(prefix, wake);
}

PrefixStatus ConsulBackend::read_status(const std::string& prefix, const Wake* wake) {
  ConsulClient client(config_.client);
  return status_of_keys(prefix, client.get(semaphore_keys(prefix), true, 0, false, wake).pairs);
}

// Blocking queries on the whole prefix, each from the index the last one answered with (kept
// across a failure: a change meanwhile answers at once), paced as WaitIndex says.
void ConsulBackend::watch_status(const std::string& prefix, Deadline deadline,
                                 const Interrupt& interrupt,
                                 const std::function<void(const PrefixStatus&)>& show) {
  ConsulClient client(config_.client);
  WaitIndex index;
  // A blocking query waits longer than a hold goes between renewals, on a connection that carries
  // nothing else: the probe is a plain read of the prefix on a second one.
  ConsulClient probe_client(config_.client);
  auto probe = [&](std::chrono::milliseconds timeout, const Wake& wake) {
    probe_client.limit(Deadline::after(timeout), timeout);
    probe_client.get(semaphore_keys(prefix), true, 0, false, &wake);
  };
  follow_prefix(prefix, deadline, interrupt, config_.session.timing(), probe,
                [&](const Wake& wake, const Heard& heard) {
                  auto sent = Clock::now();
                  KvRead r = client.get(semaphore_keys(prefix), true, index.index(), false, &wake);
                  heard();
                  auto pause = index.answered(
                      r.index, fingerprint(r.pairs),
                      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - sent));
                  show(status_of_keys(prefix, r.pairs));
                  pause_unless_woken(pause, &wake);
                  return Look::changed;
                });
}

std::unique_ptr<Hold> ConsulBackend::acquire(const LockSpec& spec, Deadline deadline,
                                             const Interrupt& interrupt, const Queued& queued) {
  std::unique_ptr<ConsulSession> session;
  auto open_lease = [&](const Wake& wake) -> LeaseKeeper& {
    session = open_session(config_, spec, deadline, wake);
    return session->keeper();
  };
  auto contend = [&](LeaseWait& wait) {
    return std::make_unique<ConsulContention>(config_, spec, std::move(session), deadline, wait);
  };
  // -timeout ends the wait, not a request: one that fails is the agent's fault, whenever it ends.
  LeasedRecipe recipe{
      .open_lease = open_lease, .contend = contend, .deadline_ends_requests = false};
  return leased_acquire(spec, deadline, interrupt, queued, recipe);
}

}  // namespace lk
