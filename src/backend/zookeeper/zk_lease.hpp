#pragma once
// A ZooKeeper session kept as a lease, so that a hold the server may have dropped counts as lost
// in time. The server may expire the session as early as a negotiated timeout after the last
// request it answered, and the C client says nothing until 2/3 of that has passed (and never
// expires a session by itself). So lock does not wait for the client's callbacks: every
// timeout/3 or sooner the keeper looks up our node (a waiter's, every 3/10 of it), and the send
// time of the last answered lookup, or of any answered request of the recipe's
// (LeaseKeeper::confirmed), starts the lease-safe deadline of lease_budget.hpp. A lookup also
// re-arms the watch on our node, so its deletion, or the session's expiry, ends the hold at once.
#include <memory>
#include <mutex>
#include <string>

#include "backend/lease/lease_keeper.hpp"
#include "backend/zookeeper/zk_session.hpp"
#include "util/event_fd.hpp"

namespace lk {

class ZkLease {
 public:
  // Connects (within `connect_by` and the requested timeout, whichever is sooner) and plans the
  // budget on the timeout the server granted.
  ZkLease(const std::string& connect, std::chrono::milliseconds requested_timeout,
          std::chrono::nanoseconds stop_grace, int monitor_retry, Deadline connect_by,
          const Wake* wake);
  ~ZkLease();

  ZkSession& session() { return *session_; }
  LeaseKeeper& keeper() { return *keeper_; }
  // The node whose deletion loses the hold (or our place in line); empty for none yet. Its watch
  // is set by the keeper's next look, or by arm_watch().
  void watch_node(const std::string& path);
  // Sets the watch on that node now, unless a look since watch_node() set it and it has not
  // fired: a turn that came with a renewal costs no request more. False if the node is gone.
  bool arm_watch(std::chrono::milliseconds timeout, const Wake* wake);
  // Stops the keeper, deletes `path` (bounded) and closes the session.
  void end(const std::string& path);

 private:
  std::unique_ptr<ZkSession> session_;
  std::mutex mutex_;
  std::string node_;
  bool armed_ = false;  // a watch on node_ is set and has not fired
  std::unique_ptr<LeaseKeeper> keeper_;
  bool ended_ = false;
};

}  // namespace lk
