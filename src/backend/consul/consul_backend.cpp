#include "backend/consul/consul_backend.hpp"

#include "backend/consul/consul_cleanup.hpp"
#include "backend/consul/consul_hold.hpp"
#include "backend/consul/consul_recipes.hpp"
#include "backend/consul/consul_session.hpp"
#include "backend/consul/wait_index.hpp"
#include "backend/lease/lease_wait.hpp"
#include "cli/duration.hpp"
#include "util/log.hpp"

namespace lk {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// api.Lock's pause after a failed acquire of a free key: a lock-delay is in force.
constexpr std::chrono::seconds kLockRetryTime{5};

HolderRecord record_of(const std::string& prefix, const KvPair& pair) {
  try {
    return HolderRecord::from_json(pair.value);
  } catch (const Error&) {
    HolderRecord r;  // consul lock stores no value; -value may be anything
    r.prefix = prefix;
    r.name = pair.value.empty() ? "session " + pair.session : pair.value;  // escaped where shown
    return r;
  }
}

}  // namespace

PrefixStatus ConsulBackend::status(const std::string& prefix, const Wake* wake) {
  ConsulClient client(config_.client);
  KvRead r = client.get(semaphore_keys(prefix), true, 0, false, wake);
  PrefixStatus s;
  const KvPair* lock = nullptr;
  for (const KvPair& p : r.pairs)
    if (p.key == lock_key(prefix)) lock = &p;
  if (!lock) return s;
  if (lock->flags == kLockFlags) {
    s.limit = 1;
    if (!lock->session.empty()) {
      HolderRecord h = record_of(prefix, *lock);
      h.token = lock->modify_index;  // see acquire()
      s.holders.push_back(h);
    }
    return s;
  }
  s.limit = semaphore_limit(lock->value);
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
  auto session = std::make_unique<ConsulSession>(config_.client, request, timing, deadline, interrupt);
  const std::string& id = session->id();
  ConsulClient client(config_.client);
  std::string value = config_.session.value.value_or(HolderRecord::for_this_process(spec.prefix, spec.session_name).to_json());

  LeaseWait wait(deadline, interrupt, session->keeper());
  Wake wake = wait.wake();
  client.wait_out_retry_after(deadline, &wake);
  // Leaves the line within one cleanup budget, so that giving up is quick even when the agent
  // hangs, and says why the wait ended.
  auto give_up = [&] {
    Cleanup cleanup(Deadline::after(kReleaseBudget));
    if (!is_lock) {
      client.limit(cleanup.until(), kCleanupRequestTimeout);
      client.no_retry_after();
      // The session's destruction deletes our contender key all the same.
      cleanup.run([&] { leave_semaphore(client, spec.prefix, spec.limit, id); },
                  Deadline::after(kReleaseBudget / 2));
    }
    if (!session->destroy(cleanup)) cleanup.report(session->left_behind());
    wait.throw_why(spec.prefix);
  };
  // Times a blocking query, for WaitIndex.
  auto read = [&](const std::string& key, bool recurse, WaitIndex& waits, milliseconds& pause) {
    auto sent = Clock::now();
    KvRead r = client.get(key, recurse, waits.index(), false, &wake);
    pause = waits.answered(r.index, fingerprint(r.pairs),
                           std::chrono::duration_cast<milliseconds>(Clock::now() - sent));
    return r;
  };

  try {
    if (is_lock) {
      std::string key = lock_key(spec.prefix);
      WaitIndex waits;
      for (;;) {  // api.Lock.Lock
        if (!wait.keep_going()) give_up();
        milliseconds pause;
        KvRead r = read(key, false, waits, pause);
        const KvPair* pair = r.pairs.empty() ? nullptr : &r.pairs[0];
        if (pair) check_lock_flags(*pair);
        if (pair && !pair->session.empty() && pair->session != id) {
          verbose("{} is held by session {}; waiting", key, printable(pair->session));
          interrupt.queued();  // a lock's contenders keep no place in line: waiting is all
          wait.pause(pause);
          continue;
        }
        if (client.acquire(key, value, kLockFlags, id)) {
          // Read back from the leader: only a key our session really holds counts. The fencing
          // token is the key's ModifyIndex, the Raft index of our acquire, which never goes back.
          // Not its LockIndex: that starts over at 1 once .lock is deleted (by the last one out,
          // as consul lock does too) and made again.
          KvRead held = client.get(key, false, 0, true);
          if (!held.pairs.empty() && held.pairs[0].session == id) {
            verbose("acquired {} (ModifyIndex {}, LockIndex {}) with session {}", key,
                    held.pairs[0].modify_index, held.pairs[0].lock_index, id);
            return std::make_unique<ConsulHold>(
                config_.client, std::move(session),
                ConsulHoldSpec{spec.prefix, 1, key, held.pairs[0].modify_index});
          }
          verbose("Consul said {} was acquired, but our session does not hold it; looking again", key);
          wait.pause(waits.stalled());
          continue;
        }
        // Refused: someone else was quicker (wait on them), or a lock-delay is in force.
        waits.stalled();
        KvRead again = client.get(key, false);
        waits.answered(again.index, fingerprint(again.pairs), milliseconds(0));
        if (!again.pairs.empty() && !again.pairs[0].session.empty()) continue;
        verbose("{} is free but a lock-delay is in force; trying again in {}s", key, kLockRetryTime.count());
        wait.pause(kLockRetryTime);
        waits.stalled();
      }
    }

    std::string contender = spec.prefix + "/" + id;
    if (!client.acquire(contender, value, kSemaphoreFlags, id))
      throw Error("failed to make contender entry " + contender);
    interrupt.queued();
    WaitIndex waits;
    for (;;) {  // api.Semaphore.Acquire
      if (!wait.keep_going()) give_up();
      milliseconds pause;
      KvRead r = read(semaphore_keys(spec.prefix), true, waits, pause);
      SemaphoreState s = read_semaphore(r.pairs, spec.prefix, spec.limit);
      if (static_cast<int>(s.holders.size()) >= s.limit) {
        verbose("all {} slots of {} are taken; waiting", s.limit, spec.prefix);
        wait.pause(pause);
        continue;
      }
      s.holders[id] = true;
      if (!client.put_cas(lock_key(spec.prefix), encode_semaphore(s), kSemaphoreFlags, s.modify_index)) {
        wait.pause(waits.stalled());  // someone else changed it first: look again
        continue;
      }
      // Read back from the leader: only a slot that the recipe's own rules count as ours is one
      // (our session among the holders, and holding our contender key).
      KvRead held = client.get(semaphore_keys(spec.prefix), true, 0, true);
      SemaphoreState now = read_semaphore(held.pairs, spec.prefix, spec.limit);
      if (!now.holders.contains(id)) {
        verbose("Consul took our slot of {}, but the holders it lists do not include us; looking again", spec.prefix);
        wait.pause(waits.stalled());
        continue;
      }
      verbose("took a slot of {} ({} of {} held) with session {}", spec.prefix, now.holders.size(),
              now.limit, id);
      return std::make_unique<ConsulHold>(
          config_.client, std::move(session),
          ConsulHoldSpec{spec.prefix, spec.limit, contender, now.modify_index});
    }
  } catch (const Cancelled&) {
    give_up();
  }
  wait.throw_why(spec.prefix);  // give_up() has thrown already
}

}  // namespace lk
