#include "backend/etcd/etcd_backend.hpp"

#include "backend/etcd/etcd_layout.hpp"
#include "backend/etcd/etcd_recipe.hpp"
#include "util/printable.hpp"

namespace lk {

PrefixStatus EtcdBackend::status(const std::string& prefix, const Wake* wake) {
  EtcdClient client(config_.client);
  Queue q = read_queue(client, prefix, 0, true, wake);
  PrefixStatus s;
  if (q.contenders.empty()) return s;
  s.limit = q.contenders.front().limit;
  int rank = 0;
  for (const Contender& c : q.contenders)
    (rank++ < s.limit ? s.holders : s.waiters).push_back(record_of(prefix, c));
  return s;
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
