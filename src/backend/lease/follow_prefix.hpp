#pragma once
// -status -watch on a server, whatever the protocol. Each look reads the prefix, shows it, and
// waits until the server says something under it changed: an etcd watch, a Consul blocking
// query, ZooKeeper's watches. Each backend resumes a look where the last one left off (a
// revision, an index, watches left in place), so that a failure in between hides no change.
//
// The server's silence is counted as a hold counts it, from the last time it was heard: a look
// tells each answer, and a server quiet for as long as a hold goes between renewals is asked one
// cheap question (the backend's probe), on the hold's schedule (RenewalSchedule: -session-ttl,
// -kill-after, -monitor-retry). A look that fails for a fault a hold rides out (no answer, a 5xx,
// no leader, a lost session) is made again after a backoff. Once a hold would have to give up
// (LeaseTiming::stop_after() without an answer), the watch fails with the last error: a companion
// that shows a leader who may be gone is worse than one that stops and says why.
#include <chrono>
#include <functional>

#include "backend/backend.hpp"
#include "backend/lease/lease_budget.hpp"

namespace lk {

enum class Look {
  changed,  // the server said something changed: look again at once
  quiet,    // the wait ended without news (a stream the server closed)
};

// What a look says each time its server answered it.
using Heard = std::function<void()>;
// One cheap request that shows the server alive: returns once it was answered within `timeout`;
// throws NetworkError when it was not, Cancelled when `wake` said stop.
using Probe = std::function<void(std::chrono::milliseconds timeout, const Wake& wake)>;

// Calls `look` with what cuts its wait short (Cancelled) until `interrupt` says stop or
// `deadline` passes, then returns; throws Error once the server was not heard for the budget. A
// look that ends quietly at once, again and again, is paused as a failed one is, so that a
// server that does not block cannot make us spin. `probe` runs inside the wake's keep_going,
// while a look waits.
void follow_prefix(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                   const LeaseTiming& timing, const Probe& probe,
                   const std::function<Look(const Wake&, const Heard&)>& look);

}  // namespace lk
