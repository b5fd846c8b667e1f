#include "backend/consul/consul_hold.hpp"

#include <poll.h>

#include "backend/consul/consul_layout.hpp"
#include "backend/consul/wait_index.hpp"
#include "util/log.hpp"

namespace lk {

using std::chrono::milliseconds;

ConsulHold::ConsulHold(const ConsulConfig& config, std::unique_ptr<ConsulSession> session,
                       ConsulHoldSpec spec)
    : config_(config), session_(std::move(session)), spec_(std::move(spec)) {
  monitor_ = std::thread([this] { monitor(); });
}

ConsulHold::~ConsulHold() {
  try {
    release();
  } catch (...) {
    // Unwinding already; the session expires by itself.
  }
}

EnvVars ConsulHold::child_env() const {
  return {{"LOCK_PREFIX", spec_.prefix},
          {"LOCK_KEY", spec_.key},
          {"LOCK_FENCING_TOKEN", std::to_string(spec_.token)},
          {"LOCK_SESSION", session_->id()}};
}

void ConsulHold::stop_monitor() {
  stop_.notify();
  if (monitor_.joinable()) monitor_.join();
}

bool ConsulHold::monitor_pause(milliseconds pause) const {
  pollfd p{stop_.fd(), POLLIN, 0};
  return poll(&p, 1, static_cast<int>(pause.count())) == 0;
}

bool ConsulHold::stopping() const { return !monitor_pause(milliseconds(0)); }

// Why the hold is gone, or nullopt while it lasts, as a read of the key (or the prefix) says.
std::optional<std::string> ConsulHold::still_held(const KvRead& r) const {
  const std::string& session = session_->id();
  if (spec_.limit == 1) {
    if (r.pairs.empty() || r.pairs[0].session != session)
      return "the key " + spec_.key + " is no longer held by our session " + session +
             " (session destroyed or expired, or the key released or deleted)";
    return std::nullopt;
  }
  SemaphoreState s = read_semaphore(r.pairs, spec_.prefix, spec_.limit);
  if (!s.holders.contains(session))
    return "our session " + session + " is no longer among the holders in " +
           lock_key(spec_.prefix);
  return std::nullopt;
}

// A query that fails (no answer, 5xx, a garbled reply) is asked again after a pause, for as long
// as it takes: api.Lock gives up after -monitor-retry failures, but here the lease keeper decides
// when an unconfirmed hold must end, by the lease's own deadline, and a monitor that gave up
// earlier would stop the child while the session is still known to be alive.
void ConsulHold::monitor() {
  ConsulClient client(config_);
  LeaseKeeper& keeper = session_->keeper();
  Wake wake{{stop_.fd()}, [this] { return !stopping(); }};
  bool lock = spec_.limit == 1;
  std::string key = lock ? spec_.key : semaphore_keys(spec_.prefix);
  WaitIndex waits;
  for (;;) {
    milliseconds pause(0);
    try {
      auto sent = Clock::now();
      KvRead r = client.get(key, !lock, waits.index(), true, &wake);
      pause = waits.answered(r.index, fingerprint(r.pairs),
                             std::chrono::duration_cast<milliseconds>(Clock::now() - sent));
      if (auto lost = still_held(r)) return keeper.lose(*lost);
    } catch (const NetworkError& e) {
      pause = waits.failed(retry_after_of(e));
      verbose("monitoring the lock failed ({}); asking again in {}ms", e.what(), pause.count());
    } catch (const MalformedReply& e) {
      pause = waits.failed();
      verbose("monitoring the lock failed ({}); asking again in {}ms", e.what(), pause.count());
    } catch (const std::exception& e) {  // .lock rewritten for another use, permission withdrawn
      if (stopping()) return;            // a query cut short by release(): nothing to decide
      return keeper.lose(std::string("monitoring the lock failed: ") + e.what());
    }
    if (pause.count() > 0 && !monitor_pause(pause)) return;
  }
}

// Acquired again by the session that holds it, as Consul allows: the value changes, the holder
// does not, and the monitor's next answer still shows our session.
void ConsulHold::hold_until(const std::string& until) {
  auto value = HolderRecord::with_until(spec_.value, until);
  if (!value) return;
  ConsulClient client(config_);
  if (!client.acquire(spec_.key, *value, spec_.limit == 1 ? kLockFlags : kSemaphoreFlags,
                      session_->id()))
    throw Error("Consul refused to write " + spec_.key + " again");
}

void ConsulHold::release() {
  if (released_) return;
  released_ = true;
  Cleanup cleanup(Deadline::after(kReleaseBudget));
  // At most half the budget for giving the hold up: the session's destruction, which gives up
  // everything it holds at once, must always get its turn.
  Deadline give_up_by = Deadline::after(kReleaseBudget / 2);
  stop_monitor();
  session_->stop_renewing();
  ConsulClient client(config_);
  client.limit(cleanup.until(), kCleanupRequestTimeout);
  const std::string& id = session_->id();
  bool left = spec_.limit == 1
                  ? cleanup.run([&] { client.release(spec_.key, kLockFlags, id); }, give_up_by)
                  : cleanup.run([&] { leave_semaphore(client, spec_.prefix, spec_.limit, id); },
                                give_up_by);
  if (!left)
    verbose("could not give up {} ({}); destroying the session does", spec_.key,
            cleanup.failure().value_or(""));
  if (!session_->destroy(cleanup)) return cleanup.report(session_->left_behind());
  bool tidy = spec_.limit == 1
                  ? cleanup.run([&] { tidy_lock(client, spec_.prefix); })
                  : left || cleanup.run([&] { tidy_semaphore(client, spec_.prefix, spec_.limit); });
  if (!tidy)
    cleanup.report("the unheld " + lock_key(spec_.prefix) + " stays until the next lock on " +
                   spec_.prefix + " removes it");
}

void leave_semaphore(ConsulClient& client, const std::string& prefix, int limit,
                     const std::string& session) {
  // Out of the holders first (check-and-set, retried on a race), then the contender key.
  for (int attempt = 0; attempt < 10; ++attempt) {
    KvRead r = client.get(semaphore_keys(prefix), true);
    SemaphoreState s = read_semaphore(r.pairs, prefix, limit);
    if (!s.holders.erase(session)) break;
    if (client.put_cas(lock_key(prefix), encode_semaphore(s), kSemaphoreFlags, s.modify_index))
      break;
  }
  client.delete_key(prefix + "/" + session);
  tidy_semaphore(client, prefix, limit);
}

void tidy_semaphore(ConsulClient& client, const std::string& prefix, int limit) {
  KvRead r = client.get(semaphore_keys(prefix), true);
  SemaphoreState s = read_semaphore(r.pairs, prefix, limit);
  bool contenders = false;
  for (const KvPair& p : r.pairs)
    if (p.key != lock_key(prefix) && !p.session.empty()) contenders = true;
  if (!contenders && s.holders.empty() && s.modify_index)
    client.delete_cas(lock_key(prefix), s.modify_index);
}

void tidy_lock(ConsulClient& client, const std::string& prefix) {
  KvRead r = client.get(lock_key(prefix), false);
  if (!r.pairs.empty() && r.pairs[0].session.empty() && r.pairs[0].flags == kLockFlags)
    client.delete_cas(lock_key(prefix), r.pairs[0].modify_index);
}

}  // namespace lk
