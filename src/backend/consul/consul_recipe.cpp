#include "backend/consul/consul_recipe.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/consul/consul_cleanup.hpp"
#include "backend/consul/consul_layout.hpp"
#include "util/duration.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

using std::chrono::milliseconds;

// api.Lock's pause after a failed acquire of a free key: a lock-delay is in force.
constexpr std::chrono::seconds kLockRetryTime{5};

}  // namespace

// Consul's lock-delay would keep others off a lock's key a while longer after the session ends,
// but it lives in each server's memory and does not survive a restart: the child's time is
// counted from the TTL alone.
std::unique_ptr<ConsulSession> open_session(const ConsulBackendConfig& config, const LockSpec& spec,
                                            Deadline deadline, const Wake& wake) {
  nlohmann::json request = {{"Name", spec.session_name},
                            {"TTL", format_go_duration(config.session.ttl)},
                            {"LockDelay", format_go_duration(config.lock_delay)},
                            {"Behavior", spec.limit == 1 ? "release" : "delete"}};
  // Both lists, as Consul's session endpoint reads them: Checks alone would keep the default
  // serfHealth in NodeChecks, and an empty Checks is what empties NodeChecks.
  if (config.session_checks) request["Checks"] = request["NodeChecks"] = *config.session_checks;
  return std::make_unique<ConsulSession>(config.client, request, config.session.timing(), deadline,
                                         wake);
}

ConsulContention::ConsulContention(const ConsulBackendConfig& config, const LockSpec& spec,
                                   std::unique_ptr<ConsulSession> session, Deadline deadline,
                                   LeaseWait& wait)
    : config_(config),
      spec_(spec),
      session_(std::move(session)),
      client_(config.client),
      value_(config.session.value.value_or(
          HolderRecord::for_this_process(spec.prefix, spec.session_name).to_json())),
      wait_(wait),
      wake_(wait_.wake()) {
  client_.wait_out_retry_after(deadline, &wake_);
}

// The session's destruction releases a lock's key and deletes a semaphore's contender key all
// the same; a semaphore's holders are left first, so that its .lock is tidied.
void ConsulContention::leave() {
  Cleanup cleanup(Deadline::after(kReleaseBudget));
  if (spec_.limit > 1) {
    client_.limit(cleanup.until(), kCleanupRequestTimeout);
    client_.no_retry_after();
    cleanup.run([&] { leave_semaphore(client_, spec_.prefix, spec_.limit, session_->id()); },
                Deadline::after(kReleaseBudget / 2));
  }
  if (!session_->destroy(cleanup)) cleanup.report(session_->left_behind());
}

KvRead ConsulContention::read(const std::string& key, bool recurse, WaitIndex& waits,
                              milliseconds& pause) {
  auto sent = Clock::now();
  KvRead r = client_.get(key, recurse, waits.index(), false, &wake_);
  pause = waits.answered(r.index, fingerprint(r.pairs),
                         std::chrono::duration_cast<milliseconds>(Clock::now() - sent));
  return r;
}

bool ConsulContention::wait_in_turns(const std::function<bool(WaitIndex&)>& turn) {
  WaitIndex waits;
  while (wait_.keep_going()) {
    try {
      if (turn(waits)) return true;
    } catch (const NetworkError& e) {
      // The session lives on while its keeper can renew it: a request the agent did not answer
      // (or answered 5xx) is asked again after a pause, as etcd's and ZooKeeper's waits do, and
      // the wait ends only when the session does. Every turn starts from a fresh read, so a
      // write whose answer was lost is found out rather than made twice.
      milliseconds pause = waits.failed(retry_after_of(e));
      verbose("{}; asking again in {}ms", e.what(), pause.count());
      wait_.pause(pause);
    }
  }
  return false;
}

bool ConsulContention::lock(const Queued& queued) {
  const std::string& id = session_->id();
  std::string key = lock_key(spec_.prefix);
  return wait_in_turns([&](WaitIndex& waits) {
    milliseconds pause;
    KvRead r = read(key, false, waits, pause);
    const KvPair* pair = r.pairs.empty() ? nullptr : &r.pairs[0];
    if (pair) check_lock_flags(*pair);
    if (pair && !pair->session.empty() && pair->session != id) {
      verbose("{} is held by session {}; waiting", key, printable(pair->session));
      queued();  // a lock's contenders keep no place in line: waiting is all
      wait_.pause(pause);
      return false;
    }
    if (client_.acquire(key, value_, kLockFlags, id)) {
      // Read back from the leader: only a key our session really holds counts. The fencing
      // token is the key's ModifyIndex, the Raft index of our acquire, which never goes back.
      // Not its LockIndex: that starts over at 1 once .lock is deleted (by the last one out, as
      // consul lock does too) and made again.
      KvRead held = client_.get(key, false, 0, true);
      if (!held.pairs.empty() && held.pairs[0].session == id) {
        const KvPair& ours = held.pairs[0];
        held_ = {spec_.prefix, 1, key, ours.modify_index, value_};
        acquired_ = fmt::format("acquired {} (ModifyIndex {}, LockIndex {}) with session {}", key,
                                ours.modify_index, ours.lock_index, id);
        return true;
      }
      verbose("Consul said {} was acquired, but our session does not hold it; looking again", key);
      wait_.pause(waits.stalled());
      return false;
    }
    // Refused: someone else was quicker (wait on them), or a lock-delay is in force.
    waits.stalled();
    KvRead again = client_.get(key, false);
    std::uint64_t found_again = fingerprint(again.pairs);
    waits.answered(again.index, found_again, milliseconds(0));
    if (!again.pairs.empty() && !again.pairs[0].session.empty()) return false;
    // api.Lock takes any key found free again for a lock-delay, and pauses 5 s with the lock
    // free. But a key that changed since we found it free was taken and let go in between: we
    // lost a race to a holder already gone, and look again at once. Only a key just as we
    // found it (or missing both times) leaves a lock-delay as the reason.
    if (found_again != fingerprint(r.pairs)) {
      verbose("{} was taken and let go before our acquire; looking again", key);
      wait_.pause(waits.stalled());
      return false;
    }
    verbose("{} is free but a lock-delay is in force; trying again in {}s", key,
            kLockRetryTime.count());
    wait_.pause(kLockRetryTime);
    waits.stalled();
    return false;
  });
}

bool ConsulContention::semaphore(const Queued& queued) {
  const std::string& id = session_->id();
  std::string contender = spec_.prefix + "/" + id;
  if (!client_.acquire(contender, value_, kSemaphoreFlags, id))
    throw Error("failed to make contender entry " + contender);
  queued();
  return wait_in_turns([&](WaitIndex& waits) {
    milliseconds pause;
    KvRead r = read(semaphore_keys(spec_.prefix), true, waits, pause);
    SemaphoreState s = read_semaphore(r.pairs, spec_.prefix, spec_.limit);
    // Already listed: a check-and-set of ours took effect but its answer was lost.
    if (!s.holders.contains(id)) {
      if (static_cast<int>(s.holders.size()) >= s.limit) {
        verbose("all {} slots of {} are taken; waiting", s.limit, spec_.prefix);
        wait_.pause(pause);
        return false;
      }
      s.holders[id] = true;
      if (!client_.put_cas(lock_key(spec_.prefix), encode_semaphore(s), kSemaphoreFlags,
                           s.modify_index)) {
        wait_.pause(waits.stalled());  // someone else changed it first: look again
        return false;
      }
    }
    // Read back from the leader: only a slot that the recipe's own rules count as ours is one
    // (our session among the holders, and holding our contender key).
    KvRead held = client_.get(semaphore_keys(spec_.prefix), true, 0, true);
    SemaphoreState now = read_semaphore(held.pairs, spec_.prefix, spec_.limit);
    if (!now.holders.contains(id)) {
      verbose(
          "Consul took our slot of {}, but the holders it lists do not include us; looking again",
          spec_.prefix);
      wait_.pause(waits.stalled());
      return false;
    }
    held_ = {spec_.prefix, spec_.limit, contender, now.modify_index, value_};
    acquired_ = fmt::format("took a slot of {} ({} of {} held) with session {}", spec_.prefix,
                            now.holders.size(), now.limit, id);
    return true;
  });
}

std::unique_ptr<Hold> ConsulContention::hold() {
  verbose("{}", acquired_);
  return std::make_unique<ConsulHold>(config_.client, std::move(session_), std::move(held_));
}

}  // namespace lk
