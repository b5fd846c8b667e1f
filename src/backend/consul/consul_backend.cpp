#include "backend/consul/consul_backend.hpp"

#include "backend/consul/consul_layout.hpp"
#include "backend/consul/consul_recipe.hpp"

namespace lk {
namespace {

HolderRecord record_of(const std::string& prefix, const KvPair& pair) {
  return HolderRecord::from_value(prefix, pair.value, "session " + pair.session);
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
      h.token = lock->modify_index;  // see ConsulContention::lock()
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
  ConsulContention contention(config_, spec, deadline, interrupt);
  try {
    return spec.limit == 1 ? contention.lock() : contention.semaphore();
  } catch (const Cancelled&) {
    contention.give_up();
  }
}

}  // namespace lk
