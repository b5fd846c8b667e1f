#pragma once
// -status -watch on a server, whatever the protocol. Each look reads the prefix, shows it, and
// waits until the server says something under it changed: an etcd watch, a Consul blocking
// query, ZooKeeper's watches; never a timer. Each backend resumes a look where the last one
// left off (a revision, an index, watches left in place), so that a failure in between hides
// no change.
//
// A look that fails for a fault a hold rides out (no answer, a 5xx, no leader, a lost session)
// is made again after a backoff, from the first failure in a row for as long as a hold keeps its
// lease without a renewal (LeaseTiming::stop_after(): the same -session-ttl, -kill-after and
// -monitor-retry); past that, the watch fails with the last error. A companion that shows a
// leader who may be gone is worse than one that stops and says why.
#include <chrono>
#include <functional>

#include "backend/backend.hpp"
#include "backend/lease/lease_budget.hpp"

namespace lk {

enum class Look {
  changed,  // the server said something changed: look again at once
  quiet,    // the wait ended without news (a stream the server closed)
};

// Calls `look` with what cuts its wait short (Cancelled) until `interrupt` says stop or
// `deadline` passes, then returns. A look that ends quietly at once, again and again, is paused
// as a failed one is, so that a server that does not block cannot make us spin.
void follow_prefix(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                   const LeaseTiming& timing, const std::function<Look(const Wake&)>& look);

}  // namespace lk
