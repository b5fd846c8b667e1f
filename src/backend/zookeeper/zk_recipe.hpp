#pragma once
// Apache Curator's recipes, one function per routine so that each reads beside its anchor in
// Curator's source: lock() is InterProcessMutex.acquire, mutex() its LockInternals.attemptLock,
// semaphore() is InterProcessSemaphoreV2.acquire, create_protected() is CreateBuilder's
// protected mode. As in Curator, one whose wait ends first returns no node (false), and leaves
// saying why to the skeleton (leased_acquire.hpp). The nodes they make are laid out as
// zk_layout.hpp says.
#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.hpp"
#include "backend/lease/backoff.hpp"
#include "backend/lease/lease_wait.hpp"
#include "backend/lease/leased_acquire.hpp"
#include "backend/zookeeper/zk_lease.hpp"
#include "backend/zookeeper/zk_session.hpp"

namespace lk {

// How long one request may go unanswered before it counts as lost.
constexpr std::chrono::milliseconds kZkRequestTimeout{5000};

class MadeParents;

struct OwnNode {
  std::string path;
  std::int64_t czxid = 0;
};

std::string child_path(const std::string& dir, const std::string& name);

// One acquisition: our nodes, in the order Curator's recipes make them, on one session.
class ZkContention : public Contention {
 public:
  // Our nodes carry `value` when given (-value), else our holder record with the limit.
  ZkContention(std::unique_ptr<ZkLease> lease, LeaseWait& wait, const LockSpec& spec,
               const std::optional<std::string>& value);

  // InterProcessMutex on the prefix: true once our node is first.
  bool lock(const Queued& queued) override;
  // InterProcessSemaphoreV2 with spec.limit leases: true once our lease node counts.
  bool semaphore(const Queued& queued) override;
  // Sets the watch on our node, if no look has set it already (ZkLease::arm_watch): only now,
  // after the renewal a turn may need, which sets it too.
  std::unique_ptr<Hold> hold() override;

 private:
  bool keep_going() { return wait_.keep_going(); }
  // LockInternals.attemptLock on `dir`: our node once it is first.
  std::optional<OwnNode> mutex(const std::string& dir, const Queued& queued);
  std::optional<std::vector<std::string>> look_at(const std::string& dir, bool watch);
  bool watch(const std::string& path);
  bool arm_watch(const std::string& path);
  [[noreturn]] void vanished(const std::string& path);
  void retry_later(const ZkUnreachable& e);
  std::optional<OwnNode> create_protected(const std::string& dir, std::string_view name,
                                          const std::string& existing = "");
  std::optional<OwnNode> find_own(const std::string& dir, const std::string& id);
  std::optional<OwnNode> try_create(const std::string& path, bool parent_may_be_missing);
  void make_parents(const std::string& path, const std::string& existing, bool last_round,
                    MadeParents& parents);
  void refuse_semaphore_layout(const std::vector<std::string>& children);
  void refuse_lock_layout();
  void check_limits(const std::string& dir, const std::vector<std::string>& children,
                    const std::string& ours);

  std::unique_ptr<ZkLease> lease_;
  ZkSession& session_;
  LeaseWait& wait_;
  const LockSpec& spec_;
  std::string base_;
  std::string data_;  // what our nodes carry
  Wake wake_ = wait_.wake();
  Backoff backoff_;
  std::set<std::string> checked_;
  OwnNode me_;  // our lock or lease node, once our turn came
};

}  // namespace lk
