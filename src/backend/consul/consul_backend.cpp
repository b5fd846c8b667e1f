#include "backend/consul/consul_backend.hpp"

#include "backend/consul/consul_hold.hpp"
#include "backend/consul/consul_recipes.hpp"
#include "backend/consul/consul_session.hpp"
#include "backend/lease/lease_wait.hpp"
#include "cli/duration.hpp"
#include "util/log.hpp"

namespace lk {
namespace {

using nlohmann::json;

// api.Lock's pause after a failed acquire of a free key: a lock-delay is in force.
constexpr std::chrono::seconds kLockRetryTime{5};

HolderRecord record_of(const std::string& prefix, const KvPair& pair) {
  try {
    return HolderRecord::from_json(pair.value);
  } catch (const Error&) {
    HolderRecord r;  // consul lock stores no value; -value may be anything
    r.prefix = prefix;
    r.name = pair.value.empty() ? "session " + pair.session : pair.value;
    return r;
  }
}

}  // namespace

PrefixStatus ConsulBackend::status(const std::string& prefix) {
  ConsulClient client(config_.client);
  KvRead r = client.get(prefix, true);
  PrefixStatus s;
  const KvPair* lock = nullptr;
  for (const KvPair& p : r.pairs)
    if (p.key == lock_key(prefix)) lock = &p;
  if (!lock) return s;
  if (lock->flags == kLockFlags) {
    s.limit = 1;
    if (!lock->session.empty()) {
      HolderRecord h = record_of(prefix, *lock);
      h.token = lock->lock_index;
      s.holders.push_back(h);
    }
    return s;
  }
  auto j = json::parse(lock->value, nullptr, false);
  s.limit = j.is_object() ? j.value("Limit", 0) : 0;
  SemaphoreState state = read_semaphore(r.pairs, prefix, s.limit);
  for (const KvPair& p : r.pairs) {
    if (p.key == lock_key(prefix) || p.session.empty()) continue;
    HolderRecord h = record_of(prefix, p);
    (state.holders.contains(p.session) ? s.holders : s.waiters).push_back(h);
  }
  return s;
}

std::unique_ptr<Hold> ConsulBackend::acquire(const LockSpec& spec, Deadline deadline,
                                             const Interrupt& interrupt) {
  bool is_lock = spec.limit == 1;
  // Consul's lock-delay would keep others off a lock's key a while longer after the session
  // ends, but it lives in each server's memory and does not survive a restart: the child's time
  // is counted from the TTL alone.
  LeaseTiming timing = config_.session.timing();
  json request = {{"Name", spec.session_name},
                  {"TTL", format_go_duration(config_.session.ttl)},
                  {"LockDelay", format_go_duration(config_.lock_delay)},
                  {"Behavior", is_lock ? "release" : "delete"}};
  auto session = std::make_unique<ConsulSession>(config_.client, request, timing);
  const std::string& id = session->id();
  ConsulClient client(config_.client);
  std::string value = config_.session.value.value_or(HolderRecord::for_this_process(spec.prefix, spec.session_name).to_json());

  LeaseWait wait(deadline, interrupt, session->keeper());
  Wake wake = wait.wake();
  auto give_up = [&] {
    if (!is_lock) {
      try {
        leave_semaphore(client, spec.prefix, spec.limit, id);
      } catch (const Error&) {
        // The session's destruction deletes our contender key all the same.
      }
    }
    wait.throw_why(spec.prefix);
  };

  if (is_lock) {
    std::string key = lock_key(spec.prefix);
    std::uint64_t index = 0;
    for (;;) {  // api.Lock.Lock
      if (!wait.keep_going()) give_up();
      KvRead r;
      try {
        r = client.get(key, false, index, false, &wake);
      } catch (const WaitStopped&) {
        give_up();
      }
      const KvPair* pair = r.pairs.empty() ? nullptr : &r.pairs[0];
      if (pair) check_lock_flags(*pair);
      if (pair && !pair->session.empty() && pair->session != id) {
        verbose("{} is held by session {}; waiting", key, pair->session);
        index = r.index;
        continue;
      }
      if (client.acquire(key, value, kLockFlags, id)) break;
      KvRead again = client.get(key, false);
      if (!again.pairs.empty() && !again.pairs[0].session.empty()) {
        index = again.index;
        continue;
      }
      verbose("{} is free but a lock-delay is in force; trying again in {}s", key, kLockRetryTime.count());
      wait.pause(kLockRetryTime);
      index = 0;
    }
    // The sequencer: the key, its LockIndex and our session.
    KvRead held = client.get(key, false, 0, true);
    if (held.pairs.empty() || held.pairs[0].session != id)
      throw Error("lost " + key + " right after acquiring it");
    verbose("acquired {} (LockIndex {}) with session {}", key, held.pairs[0].lock_index, id);
    return std::make_unique<ConsulHold>(
        config_.client, std::move(session),
        ConsulHoldSpec{spec.prefix, 1, key, held.pairs[0].lock_index, config_.session.monitor_retry});
  }

  std::string contender = spec.prefix + "/" + id;
  if (!client.acquire(contender, value, kSemaphoreFlags, id))
    throw Error("failed to make contender entry " + contender);
  std::uint64_t index = 0;
  for (;;) {  // api.Semaphore.Acquire
    if (!wait.keep_going()) give_up();
    KvRead r;
    try {
      r = client.get(spec.prefix, true, index, false, &wake);
    } catch (const WaitStopped&) {
      give_up();
    }
    SemaphoreState s;
    try {
      s = read_semaphore(r.pairs, spec.prefix, spec.limit);
    } catch (const Error&) {
      client.delete_key(contender);
      throw;
    }
    if (static_cast<int>(s.holders.size()) >= s.limit) {
      verbose("all {} slots of {} are taken; waiting", s.limit, spec.prefix);
      index = r.index;
      continue;
    }
    s.holders[id] = true;
    if (!client.put_cas(lock_key(spec.prefix), encode_semaphore(s), kSemaphoreFlags, s.modify_index))
      continue;  // someone else changed it first: look again
    KvRead held = client.get(lock_key(spec.prefix), false, 0, true);
    std::uint64_t token = held.pairs.empty() ? 0 : held.pairs[0].modify_index;
    verbose("took a slot of {} ({} of {} held) with session {}", spec.prefix, s.holders.size(),
            s.limit, id);
    return std::make_unique<ConsulHold>(
        config_.client, std::move(session),
        ConsulHoldSpec{spec.prefix, spec.limit, contender, token, config_.session.monitor_retry});
  }
}

}  // namespace lk
