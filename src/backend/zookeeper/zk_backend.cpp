#include "backend/zookeeper/zk_backend.hpp"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <set>

#include "backend/lease/backoff.hpp"
#include "backend/lease/lease_wait.hpp"
#include "backend/zookeeper/zk_hold.hpp"
#include "backend/zookeeper/zk_lease.hpp"
#include "backend/zookeeper/zk_recipe.hpp"
#include "backend/zookeeper/zk_session.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

using namespace std::chrono_literals;

constexpr std::chrono::milliseconds kRequestTimeout = 5s;
// A watch that should have fired but did not (it cannot be lost, but a look costs little).
constexpr int kLookAgainMs = 10'000;
// How often a node's container parents are made again when the server reaps them meanwhile.
constexpr int kParentRounds = 5;

struct OwnNode {
  std::string path;
  std::int64_t czxid = 0;
};

std::string child_path(const std::string& dir, const std::string& name) { return dir + "/" + name; }

// One acquisition: our nodes, in the order Curator's recipes make them, on one session.
class Contention {
 public:
  // Our nodes carry `value` when given (-value), else our holder record with the limit.
  Contention(ZkLease& lease, LeaseWait& wait, const LockSpec& spec, const Interrupt& interrupt,
             const std::optional<std::string>& value)
      : lease_(lease), session_(lease.session()), wait_(wait), spec_(spec), interrupt_(interrupt),
        base_(zk_path(spec.prefix)),
        data_(value.value_or(node_data(HolderRecord::for_this_process(spec.prefix, spec.session_name), spec.limit))) {}

  // InterProcessMutex on `dir`: returns once our node is first.
  OwnNode mutex(const std::string& dir) {
    OwnNode me = create_protected(dir, kLockName);
    watch(me.path);
    queued();
    std::string name = me.path.substr(dir.size() + 1);
    while (keep_going()) {
      try {
        auto children = session_.children(dir, false, kRequestTimeout, &wake_);
        auto sorted = curator_sorted(children.value_or(std::vector<std::string>{}), kLockName);
        if (dir == base_) refuse_semaphore_layout(sorted);
        auto at = std::find(sorted.begin(), sorted.end(), name);
        if (at == sorted.end()) vanished(me.path);
        if (at == sorted.begin()) return me;
        std::string ahead = child_path(dir, *(at - 1));
        verbose("waiting behind {} ({} ahead of us)", printable(ahead), at - sorted.begin());
        session_.drain_events();
        if (session_.exists(ahead, true, kRequestTimeout, &wake_)) wait_for_event();
        backoff_.reset();
      } catch (const ZkUnreachable& e) {
        retry_later(e);
      }
    }
    wait_.throw_why(spec_.prefix);
  }

  // InterProcessSemaphoreV2 with spec.limit leases: returns our lease node once it counts.
  OwnNode semaphore() {
    OwnNode internal = mutex(base_ + "/locks");
    refuse_lock_layout();
    // The prefix's node holds our node in locks/, so it is there and cannot be reaped: of the
    // parents, only leases/ may be missing. Made from the root down, each write that finds a
    // parent there costs the server a write to its log all the same.
    std::string leases = base_ + "/leases";
    OwnNode me = create_protected(leases, kLeaseName, base_);
    watch(me.path);
    std::string name = me.path.substr(leases.size() + 1);
    while (keep_going()) {
      try {
        session_.drain_events();
        auto children = session_.children(leases, true, kRequestTimeout, &wake_).value_or(std::vector<std::string>{});
        if (std::find(children.begin(), children.end(), name) == children.end()) vanished(me.path);
        check_limits(leases, children, name);
        if (children.size() <= static_cast<std::size_t>(spec_.limit)) {
          verbose("{} of {} leases taken, ours included", children.size(), spec_.limit);
          break;
        }
        verbose("waiting: {} leases taken, {} allowed", children.size() - 1, spec_.limit);
        wait_for_event();
        backoff_.reset();
      } catch (const ZkUnreachable& e) {
        retry_later(e);
      }
    }
    if (!wait_.keep_going()) wait_.throw_why(spec_.prefix);
    // The internal mutex only orders those who wait; it goes as soon as we hold.
    try {
      session_.remove(internal.path, kRequestTimeout);
    } catch (const Error& e) {
      verbose("{}; it goes with our session", e.what());
    }
    return me;
  }

 private:
  bool keep_going() { return wait_.keep_going(); }

  void queued() {
    if (!queued_) interrupt_.queued();
    queued_ = true;
  }

  // From now on the deletion of `path`, or the session's expiry, ends the wait or the hold at
  // once: the watch is armed here, not only at the keeper's next look (up to TTL/3 away).
  void watch(const std::string& path) {
    lease_.watch_node(path);
    while (keep_going()) {
      try {
        if (!session_.exists(path, true, kRequestTimeout, &wake_)) vanished(path);
        return;
      } catch (const ZkUnreachable& e) {
        retry_later(e);
      }
    }
    wait_.throw_why(spec_.prefix);
  }

  [[noreturn]] void vanished(const std::string& path) {
    throw Error("our node " + printable(path) + " vanished while we waited (deleted by hand, or the session expired)");
  }

  void retry_later(const ZkUnreachable& e) {
    auto pause = backoff_.next();
    verbose("{}; trying again in {}ms", e.what(), pause.count());
    wait_.pause(pause);
  }

  // Until a watch fires, or the wait is over for another reason.
  void wait_for_event() {
    std::vector<pollfd> fds{{session_.events_fd(), POLLIN, 0}};
    for (int fd : wake_.fds) fds.push_back({fd, POLLIN, 0});
    poll(fds.data(), fds.size(), kLookAgainMs);
  }

  // Creates dir/_c_<uuid>-<name><sequence>, EPHEMERAL_SEQUENTIAL, with container parents as
  // needed (below `existing`, an ancestor the caller knows is there, the first time). After a
  // connection loss the create may or may not have happened: our node is then looked for by its
  // UUID before another is made, as Curator's protected mode does.
  OwnNode create_protected(const std::string& dir, std::string_view name, const std::string& existing = "") {
    std::string id = new_protection_id();
    std::string path = child_path(dir, protected_name(id, name));
    bool maybe_made = false;
    int parents_made = 0;
    while (keep_going()) {
      try {
        if (maybe_made) {
          auto children = session_.children(dir, false, kRequestTimeout, &wake_);
          if (auto mine = find_protected(children.value_or(std::vector<std::string>{}), id)) {
            std::string found = child_path(dir, *mine);
            if (auto stat = session_.exists(found, false, kRequestTimeout, &wake_)) return {found, stat->czxid};
          }
        }
        Stat stat{};
        std::string made;
        maybe_made = true;
        try {
          made = session_.create(path, data_, ZOO_EPHEMERAL_SEQUENTIAL, kRequestTimeout, &stat, &wake_);
        } catch (const ZkError& e) {
          // No parent: made as containers, which the server may reap again before our create
          // lands (it runs its check on empty ones), or before the next of them is made under
          // it; then make them again, a few times.
          if (e.code != ZNONODE || ++parents_made > kParentRounds) throw;
          maybe_made = false;  // refused: nothing to look for
          try {
            session_.create_parents(path, kRequestTimeout, &wake_, parents_made == 1 ? existing : "");
          } catch (const ZkError& reaped) {
            // One reaped before the next was made under it: the next round makes it again, a
            // few times. (A chroot that does not exist is told at once, as an Error.)
            if (reaped.code != ZNONODE || parents_made == kParentRounds) throw;
          }
          continue;
        }
        verbose("queued as {} (czxid {})", printable(made), stat.czxid);
        return {made, stat.czxid};
      } catch (const ZkUnreachable& e) {
        retry_later(e);
      }
    }
    wait_.throw_why(spec_.prefix);
  }

  // A lock on a prefix where lock users hold a semaphore (its locks and leases children, when
  // not empty leftovers the server has yet to reap).
  void refuse_semaphore_layout(const std::vector<std::string>& children) {
    for (const char* part : {"leases", "locks"}) {
      if (std::find(children.begin(), children.end(), part) == children.end()) continue;
      auto below = session_.children(child_path(base_, part), false, kRequestTimeout, &wake_);
      if (below && !below->empty())
        throw not_lock_use(printable(child_path(base_, part)) + " is a semaphore's");
    }
  }

  // A semaphore on a prefix where a lock is held: its nodes are right below the prefix.
  void refuse_lock_layout() {
    auto children = session_.children(base_, false, kRequestTimeout, &wake_).value_or(std::vector<std::string>{});
    for (const auto& child : children)
      if (child != "locks" && child != "leases")
        throw not_semaphore_use(printable(child_path(base_, child)) + " is a lock's");
  }

  // Lock users store their limit in their nodes; Curator's nodes say nothing about it.
  void check_limits(const std::string& dir, const std::vector<std::string>& children, const std::string& ours) {
    for (const auto& child : children) {
      if (child == ours || !checked_.insert(child).second) continue;
      auto node = session_.get(child_path(dir, child), false, kRequestTimeout, &wake_);
      if (!node) continue;
      if (auto owner = parse_node_data(node->data); owner && owner->limit != spec_.limit)
        throw limit_conflict(owner->limit, spec_.limit);
    }
  }

  ZkLease& lease_;
  ZkSession& session_;
  LeaseWait& wait_;
  const LockSpec& spec_;
  const Interrupt& interrupt_;
  std::string base_;
  std::string data_;
  Wake wake_ = wait_.wake();
  Backoff backoff_;
  std::set<std::string> checked_;
  bool queued_ = false;
};

HolderRecord record_of(const std::string& prefix, const std::optional<ZkNode>& node) {
  auto owner = node ? parse_node_data(node->data) : std::nullopt;
  HolderRecord r = owner ? owner->record
                         : HolderRecord::named(prefix, node ? node->data : "",
                                               "a Curator client or another program");
  if (node) r.token = static_cast<std::uint64_t>(node->stat.czxid);
  return r;
}

}  // namespace

std::unique_ptr<Hold> ZkBackend::acquire(const LockSpec& spec, Deadline deadline,
                                         const Interrupt& interrupt) {
  Wake connect_wake{{interrupt.fd}, [&] { return !interrupt.should_stop(); }};
  try {
    auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease.ttl);
    auto lease = std::make_unique<ZkLease>(config_.connect, ttl, config_.lease.kill_after,
                                           config_.lease.monitor_retry, deadline, &connect_wake);
    LeaseWait wait(deadline, interrupt, lease->keeper());
    Contention contention(*lease, wait, spec, interrupt, config_.lease.value);
    OwnNode me;
    try {
      me = spec.limit == 1 ? contention.mutex(zk_path(spec.prefix)) : contention.semaphore();
    } catch (const Cancelled&) {
      wait.throw_why(spec.prefix);  // a request cut short: the wait said why
    }
    verbose("acquired {} (czxid {})", printable(me.path), me.czxid);
    return std::make_unique<ZkHold>(std::move(lease), me.path, me.czxid, spec.prefix);
  } catch (const Cancelled&) {  // while connecting: only a signal wakes that wait
    throw Interrupted("interrupted while waiting for the lock");
  } catch (const ZkUnreachable&) {
    // A connection cut short by -timeout is the timeout, not a fault of ZooKeeper's.
    if (deadline.passed()) throw AcquireTimeout("timed out waiting for prefix '" + printable(spec.prefix) + "'");
    throw;
  }
}

PrefixStatus ZkBackend::status(const std::string& prefix, const Wake* wake) {
  auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(config_.lease.ttl);
  ZkSession session(config_.connect, ttl, Deadline::after(ttl), wake);
  std::string base = zk_path(prefix);
  PrefixStatus s;
  auto children = session.children(base, false, kRequestTimeout, wake);
  if (!children || children->empty()) return s;
  auto read = [&](const std::string& dir, const std::string& name) {
    return record_of(prefix, session.get(child_path(dir, name), false, kRequestTimeout, wake));
  };
  // A semaphore's layout, unless its leases are an empty container left over from an earlier use
  // (the server reaps those only at its next container check).
  std::string leases = base + "/leases";
  std::vector<std::string> taken;
  if (std::find(children->begin(), children->end(), "leases") != children->end())
    taken = curator_sorted(session.children(leases, false, kRequestTimeout, wake).value_or(std::vector<std::string>{}), kLeaseName);
  if (taken.empty()) {
    s.limit = 1;
    int rank = 0;
    for (const auto& name : curator_sorted(*children, kLockName))
      if (name != "locks" && name != "leases") (rank++ == 0 ? s.holders : s.waiters).push_back(read(base, name));
    if (s.holders.empty()) s.limit = 0;
    return s;
  }
  std::vector<HolderRecord> records;
  for (const auto& name : taken) {
    auto node = session.get(child_path(leases, name), false, kRequestTimeout, wake);
    if (auto owner = node ? parse_node_data(node->data) : std::nullopt) s.limit = std::max(s.limit, owner->limit);
    records.push_back(record_of(prefix, node));
  }
  if (s.limit == 0) {  // Curator's alone, which store no limit: every lease holds
    s.limit_unknown = true;
    s.limit = static_cast<int>(records.size());
  }
  for (std::size_t i = 0; i < records.size(); ++i)
    (static_cast<int>(i) < s.limit ? s.holders : s.waiters).push_back(records[i]);
  // Behind them, those queued on the internal mutex; its first has its lease node counted above.
  std::string locks = base + "/locks";
  auto queue = curator_sorted(session.children(locks, false, kRequestTimeout, wake).value_or(std::vector<std::string>{}), kLockName);
  for (std::size_t i = 1; i < queue.size(); ++i) s.waiters.push_back(read(locks, queue[i]));
  if (s.holders.empty() && s.waiters.empty()) s = PrefixStatus{};
  return s;
}

}  // namespace lk
