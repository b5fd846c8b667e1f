#include "backend/zookeeper/zk_lease.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {

ZkLease::ZkLease(const std::string& connect, std::chrono::milliseconds requested_timeout,
                 std::chrono::nanoseconds stop_grace, int monitor_retry, Deadline connect_by,
                 const Wake* wake) {
  // An unreachable ensemble is reported within the session timeout, however long -timeout is.
  connect_by = Deadline::earlier(connect_by, Deadline::after(requested_timeout));
  session_ = std::make_unique<ZkSession>(connect, requested_timeout, connect_by, wake);
  LeaseTiming timing = [&] {
    try {
      return LeaseTiming::plan(session_->negotiated_timeout(), stop_grace, monitor_retry);
    } catch (const UsageError& e) {
      throw UsageError(
          fmt::format("ZooKeeper granted a session timeout of {}ms ({}ms asked for): {}",
                      session_->negotiated_timeout().count(), requested_timeout.count(), e.what()));
    }
  }();
  if (auto shortfall = timing.shortfall()) fmt::print(stderr, "lock: {}\n", *shortfall);
  // The C client pings a session it has sent nothing on for a third of its timeout. A waiter's
  // look a little sooner than that takes the ping's place; a slower one would come on top of it.
  timing.wait_renew_every =
      std::max(timing.renew_every, std::min(timing.wait_renew_every, timing.ttl * 3 / 10));

  keeper_ = std::make_unique<LeaseKeeper>(
      timing, session_->started_at(), [this](std::chrono::milliseconds timeout, const Wake& stop) {
        std::string node;
        {
          std::lock_guard lock(mutex_);
          node = node_;
        }
        try {
          // Any answer shows that the session lived when the server read the request; looking up
          // our own node also re-arms the watch that reports its deletion at once.
          if (!session_->exists(node.empty() ? "/" : node, !node.empty(), timeout, &stop) &&
              !node.empty())
            throw LeaseGone("our node " + printable(node) +
                            " is gone (deleted by hand, or the session expired)");
          std::lock_guard lock(mutex_);
          if (!node.empty() && node == node_) armed_ = true;
        } catch (const ZkError& e) {
          if (e.code == ZSESSIONEXPIRED) throw LeaseGone("ZooKeeper expired our session");
          throw;
        }
      });
  session_->set_listener([this](int type, int state, const std::string& path) {
    if (type == ZOO_SESSION_EVENT && state == ZOO_EXPIRED_SESSION_STATE)
      return keeper_->lose("ZooKeeper expired our session");
    if (type == ZOO_SESSION_EVENT && state == ZOO_AUTH_FAILED_STATE)
      return keeper_->lose("ZooKeeper refused our session (authentication failed)");
    std::lock_guard lock(mutex_);
    if (path != node_) return;
    armed_ = false;  // a watch fires once
    if (type == ZOO_DELETED_EVENT) keeper_->lose("our node " + printable(path) + " was deleted");
  });
}

ZkLease::~ZkLease() { end(""); }

void ZkLease::watch_node(const std::string& path) {
  std::lock_guard lock(mutex_);
  node_ = path;
  armed_ = false;
}

bool ZkLease::arm_watch(std::chrono::milliseconds timeout, const Wake* wake) {
  std::string node;
  {
    std::lock_guard lock(mutex_);
    if (armed_) return true;
    node = node_;
  }
  if (!session_->exists(node, true, timeout, wake)) return false;
  std::lock_guard lock(mutex_);
  if (node == node_) armed_ = true;
  return true;
}

void ZkLease::end(const std::string& path) {
  if (ended_) return;
  ended_ = true;
  session_->set_listener(nullptr);
  keeper_->stop();
  // Our node goes with the session anyway; deleting it first lets the next contender in at once,
  // and tells whether the server answers at all.
  try {
    if (!path.empty()) session_->remove(path, kReleaseBudget);
  } catch (const ZkUnreachable& e) {
    if (keeper_->may_be_gone())  // the hold was lost: the session may be gone, and the node with it
      verbose("{}", e.what());
    else
      fmt::print(stderr,
                 "lock: {}; our node goes when ZooKeeper expires the session, within {}ms\n",
                 e.what(), session_->negotiated_timeout().count());
    // Closing would wait for the same server again. The process is about to exit.
    abandon(std::move(session_));
    return;
  } catch (const Error& e) {
    verbose("{}", e.what());  // the session expired or the node was removed: gone all the same
  }
  session_.reset();  // closes the session
}

}  // namespace lk
