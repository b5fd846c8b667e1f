#include "backend/consul/consul_hold.hpp"

#include <poll.h>
#include <sys/eventfd.h>

#include "backend/consul/consul_recipes.hpp"
#include "util/log.hpp"

namespace lk {

ConsulHold::ConsulHold(const ConsulConfig& config, std::unique_ptr<ConsulSession> session,
                       ConsulHoldSpec spec)
    : config_(config),
      session_(std::move(session)),
      spec_(std::move(spec)),
      stop_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!stop_) throw sys_error("eventfd");
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
  std::uint64_t one = 1;
  (void)!write(stop_.get(), &one, sizeof one);
  if (monitor_.joinable()) monitor_.join();
}

// Why the hold is gone, or nullopt while it lasts; `index` is where the next query waits.
std::optional<std::string> ConsulHold::still_held(ConsulClient& client, std::uint64_t& index) {
  Wake wake{{stop_.get()}, [&] {
              pollfd p{stop_.get(), POLLIN, 0};
              return poll(&p, 1, 0) == 0;
            }};
  const std::string& session = session_->id();
  if (spec_.limit == 1) {
    KvRead r = client.get(spec_.key, false, index, true, &wake);
    index = r.index;
    if (r.pairs.empty() || r.pairs[0].session != session)
      return "the key " + spec_.key + " is no longer held by our session " + session +
             " (session destroyed or expired, or the key released or deleted)";
    return std::nullopt;
  }
  KvRead r = client.get(spec_.prefix, true, index, true, &wake);
  index = r.index;
  SemaphoreState s = read_semaphore(r.pairs, spec_.prefix, spec_.limit);
  if (!s.holders.contains(session))
    return "our session " + session + " is no longer among the holders in " + lock_key(spec_.prefix);
  return std::nullopt;
}

// Transient failures (no answer, 5xx) are retried 1 s apart, -monitor-retry times in a row; the
// keeper's lease-safe deadline bounds the whole affair regardless.
void ConsulHold::monitor() {
  ConsulClient client(config_);
  LeaseKeeper& keeper = session_->keeper();
  std::uint64_t index = 0;
  int failures = 0;
  for (;;) {
    try {
      if (auto lost = still_held(client, index)) return keeper.lose(*lost);
      failures = 0;
    } catch (const WaitStopped&) {
      return;
    } catch (const NetworkError& e) {
      if (++failures > spec_.monitor_retry)
        return keeper.lose(fmt::format("monitoring the lock failed {} times: {}", failures, e.what()));
      verbose("monitoring the lock failed ({}); retrying in 1s", e.what());
      index = 0;
      pollfd p{stop_.get(), POLLIN, 0};
      if (poll(&p, 1, 1000) > 0) return;
    } catch (const std::exception& e) {
      return keeper.lose(std::string("monitoring the lock failed: ") + e.what());
    }
  }
}

void ConsulHold::release() {
  if (released_) return;
  released_ = true;
  stop_monitor();
  ConsulClient client(config_);
  try {
    if (spec_.limit == 1) {
      client.release(spec_.key, kLockFlags, session_->id());
    } else {
      leave_semaphore(client, spec_.prefix, spec_.limit, session_->id());
    }
  } catch (const Error& e) {
    verbose("could not release {} ({}); destroying the session releases it", spec_.key, e.what());
  }
  session_->destroy();
  try {
    if (spec_.limit == 1) tidy_lock(client, spec_.prefix);
  } catch (const Error& e) {
    verbose("could not remove {} ({})", lock_key(spec_.prefix), e.what());
  }
}

void leave_semaphore(ConsulClient& client, const std::string& prefix, int limit,
                     const std::string& session) {
  // Out of the holders first (check-and-set, retried on a race), then the contender key.
  for (int attempt = 0; attempt < 10; ++attempt) {
    KvRead r = client.get(prefix, true);
    SemaphoreState s = read_semaphore(r.pairs, prefix, limit);
    if (!s.holders.erase(session)) break;
    if (client.put_cas(lock_key(prefix), encode_semaphore(s), kSemaphoreFlags, s.modify_index)) break;
  }
  client.delete_key(prefix + "/" + session);
  // Destroy: .lock goes once no contender and no holder is left.
  KvRead r = client.get(prefix, true);
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
