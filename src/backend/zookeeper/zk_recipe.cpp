#include "backend/zookeeper/zk_recipe.hpp"

#include <algorithm>

#include "backend/zookeeper/zk_hold.hpp"
#include "backend/zookeeper/zk_layout.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

// A watch that should have fired but did not (it cannot be lost, but a look at one node costs
// little).
constexpr int kLookAgainMs = 10'000;
// How often a node's container parents are made again when the server reaps them meanwhile.
constexpr int kParentRounds = 5;
// How long removing one container we made, on giving up, may take.
constexpr std::chrono::milliseconds kUnmakeTimeout{1000};

}  // namespace

// The containers made for a node of ours that was then never made, because the wait ended first.
// The server reaps a container only once it has had a child, so these would stay for good; they
// are removed, deepest first. Each carries the UUID of the node it was made for, which tells ours
// from others' when a create's answer never came (a signal, a lost connection). One that is not
// ours, or not empty (another contender's node is in it, or ours, whose create's answer was lost),
// is left to the server, and its parents with it.
class MadeParents {
 public:
  MadeParents(ZkSession& session, std::string tag) : session_(session), tag_(std::move(tag)) {}
  ~MadeParents() {
    for (auto path = sent.rbegin(); path != sent.rend(); ++path) {
      try {
        auto node = session_.get(*path, false, kUnmakeTimeout);
        if (!node) continue;  // reaped already: it had a child
        if (node->data != tag_ || node->stat.numChildren > 0) return;
        session_.remove(*path, kUnmakeTimeout);
        verbose("removed {}, made for nothing", printable(*path));
      } catch (const std::exception& e) {
        verbose("{}; left to the server", e.what());
        return;
      }
    }
  }
  MadeParents(const MadeParents&) = delete;
  MadeParents& operator=(const MadeParents&) = delete;

  const std::string& tag() const { return tag_; }
  std::vector<std::string> sent;  // the containers we may have made; cleared once our node is there

 private:
  ZkSession& session_;
  std::string tag_;
};

std::string child_path(const std::string& dir, const std::string& name) { return dir + "/" + name; }

ZkContention::ZkContention(std::unique_ptr<ZkLease> lease, LeaseWait& wait, const LockSpec& spec,
                           const std::optional<std::string>& value)
    : lease_(std::move(lease)),
      session_(lease_->session()),
      wait_(wait),
      spec_(spec),
      base_(zk_path(spec.prefix)),
      data_(value.value_or(
          node_data(HolderRecord::for_this_process(spec.prefix, spec.session_name), spec.limit))) {}

bool ZkContention::lock(const Queued& queued) {
  auto me = mutex(base_, queued);
  if (me) me_ = *me;
  return me.has_value();
}

std::optional<OwnNode> ZkContention::mutex(const std::string& dir, const Queued& queued) {
  std::optional<OwnNode> me = create_protected(dir, kLockName);
  if (!me) return std::nullopt;
  // Its watch is set by the keeper's look while we wait, or at our turn (arm_watch()): a waiter's
  // node gone by hand is found at its next look at the line or the keeper's.
  lease_->watch_node(me->path);
  queued();
  std::string name = me->path.substr(dir.size() + 1);
  while (keep_going()) {
    try {
      auto children = look_at(dir, false);
      auto sorted = curator_sorted(children.value_or(std::vector<std::string>{}), kLockName);
      if (dir == base_) refuse_semaphore_layout(sorted);
      auto at = std::find(sorted.begin(), sorted.end(), name);
      if (at == sorted.end()) vanished(me->path);
      if (at == sorted.begin()) return me;
      std::string ahead = child_path(dir, *(at - 1));
      verbose("waiting behind {} ({} ahead of us)", printable(ahead), at - sorted.begin());
      session_.drain_events();
      // After a quiet while, only the node ahead is looked at again, not the whole line: a long
      // line's waiters would each read every name in it, over and over.
      while (session_.exists(ahead, true, kZkRequestTimeout, &wake_) &&
             !session_.wait_event(wake_, kLookAgainMs) && keep_going()) {
      }
      backoff_.reset();
    } catch (const ZkUnreachable& e) {
      retry_later(e);
    }
  }
  return std::nullopt;
}

bool ZkContention::semaphore(const Queued& queued) {
  auto internal = mutex(base_ + "/locks", queued);
  if (!internal) return false;
  refuse_lock_layout();
  // The prefix's node holds our node in locks/, so it is there and cannot be reaped: of the
  // parents, only leases/ may be missing. Made from the root down, each write that finds a
  // parent there costs the server a write to its log all the same.
  std::string leases = base_ + "/leases";
  auto made = create_protected(leases, kLeaseName, base_);
  if (!made || !watch(made->path)) return false;
  me_ = *made;
  std::string name = me_.path.substr(leases.size() + 1);
  while (keep_going()) {
    try {
      session_.drain_events();
      auto children = look_at(leases, true).value_or(std::vector<std::string>{});
      if (std::find(children.begin(), children.end(), name) == children.end()) vanished(me_.path);
      check_limits(leases, children, name);
      if (children.size() <= static_cast<std::size_t>(spec_.limit)) {
        verbose("{} of {} leases taken, ours included", children.size(), spec_.limit);
        break;
      }
      verbose("waiting: {} leases taken, {} allowed", children.size() - 1, spec_.limit);
      session_.wait_event(wake_, kLookAgainMs);
      backoff_.reset();
    } catch (const ZkUnreachable& e) {
      retry_later(e);
    }
  }
  if (!keep_going()) return false;
  // The internal mutex only orders those who wait; it goes as soon as we hold.
  try {
    session_.remove(internal->path, kZkRequestTimeout);
  } catch (const Error& e) {
    verbose("{}; it goes with our session", e.what());
  }
  return true;
}

std::unique_ptr<Hold> ZkContention::hold() {
  if (!arm_watch(me_.path)) return nullptr;
  verbose("acquired {} (czxid {})", printable(me_.path), me_.czxid);
  return std::make_unique<ZkHold>(std::move(lease_), me_.path, me_.czxid, spec_.prefix, data_);
}

// Any answer on our session shows that it lived when the server read the request: the look at
// the line that finds our turn confirms the lease as a renewal would, and none is needed then.
std::optional<std::vector<std::string>> ZkContention::look_at(const std::string& dir, bool watch) {
  auto sent = Clock::now();
  auto children = session_.children(dir, watch, kZkRequestTimeout, &wake_);
  lease_->keeper().confirmed(sent);
  return children;
}

// From now on the deletion of `path`, or the session's expiry, ends the wait or the hold at once:
// the watch is armed here, not only at the keeper's next look (up to 3/10 of the TTL away).
bool ZkContention::watch(const std::string& path) {
  lease_->watch_node(path);
  return arm_watch(path);
}

// False when the wait ended first.
bool ZkContention::arm_watch(const std::string& path) {
  while (keep_going()) {
    try {
      if (!lease_->arm_watch(kZkRequestTimeout, &wake_)) vanished(path);
      return true;
    } catch (const ZkUnreachable& e) {
      retry_later(e);
    }
  }
  return false;
}

void ZkContention::vanished(const std::string& path) {
  throw Error("our node " + printable(path) +
              " vanished while we waited (deleted by hand, or the session expired)");
}

void ZkContention::retry_later(const ZkUnreachable& e) {
  auto pause = backoff_.next();
  verbose("{}; trying again in {}ms", e.what(), pause.count());
  wait_.pause(pause);
}

// Creates dir/_c_<uuid>-<name><sequence>, EPHEMERAL_SEQUENTIAL, with container parents as needed
// (below `existing`, an ancestor the caller knows is there, the first time). After a connection
// loss the create may or may not have happened: our node is then looked for by its UUID before
// another is made, as Curator's protected mode does.
std::optional<OwnNode> ZkContention::create_protected(const std::string& dir, std::string_view name,
                                                      const std::string& existing) {
  std::string id = new_protection_id();
  std::string path = child_path(dir, protected_name(id, name));
  bool maybe_made = false;  // a create was sent, and its answer lost
  int parents_made = 0;
  MadeParents parents(session_, id);
  while (keep_going()) {
    try {
      std::optional<OwnNode> mine;
      if (maybe_made) mine = find_own(dir, id);
      maybe_made = true;
      if (!mine) mine = try_create(path, parents_made < kParentRounds);
      if (mine) {
        parents.sent.clear();
        return mine;
      }
      maybe_made = false;  // refused: nothing to look for
      ++parents_made;
      make_parents(path, parents_made == 1 ? existing : "", parents_made == kParentRounds, parents);
    } catch (const ZkUnreachable& e) {
      retry_later(e);
    }
  }
  return std::nullopt;
}

// Our node in `dir`, found by the UUID in its name.
std::optional<OwnNode> ZkContention::find_own(const std::string& dir, const std::string& id) {
  auto children = session_.children(dir, false, kZkRequestTimeout, &wake_);
  auto mine = find_protected(children.value_or(std::vector<std::string>{}), id);
  if (!mine) return std::nullopt;
  std::string found = child_path(dir, *mine);
  auto stat = session_.exists(found, false, kZkRequestTimeout, &wake_);
  if (!stat) return std::nullopt;
  return OwnNode{found, stat->czxid};
}

// Our node, made; nullopt when its parent is missing and `parent_may_be_missing`.
std::optional<OwnNode> ZkContention::try_create(const std::string& path,
                                                bool parent_may_be_missing) {
  Stat stat{};
  std::string made;
  try {
    made = session_.create(path, data_, ZOO_EPHEMERAL_SEQUENTIAL, kZkRequestTimeout, &stat, &wake_);
  } catch (const ZkError& e) {
    if (e.code != ZNONODE || !parent_may_be_missing) throw;
    return std::nullopt;
  }
  verbose("queued as {} (czxid {})", printable(made), stat.czxid);
  return OwnNode{made, stat.czxid};
}

// The parents are made as containers, which the server may reap again before our create lands
// (it runs its check on empty ones), or before the next of them is made under it; then they are
// made again in the next round, a few times. (A chroot that does not exist is told at once, as an
// Error.)
void ZkContention::make_parents(const std::string& path, const std::string& existing,
                                bool last_round, MadeParents& parents) {
  try {
    session_.create_parents(path, parents.tag(), kZkRequestTimeout, &wake_, existing, parents.sent);
  } catch (const ZkError& reaped) {
    if (reaped.code != ZNONODE || last_round) throw;
  }
}

// A lock on a prefix where lock users hold a semaphore (its locks and leases children, when not
// empty leftovers the server has yet to reap).
void ZkContention::refuse_semaphore_layout(const std::vector<std::string>& children) {
  for (const char* part : {"leases", "locks"}) {
    if (std::find(children.begin(), children.end(), part) == children.end()) continue;
    auto below = session_.children(child_path(base_, part), false, kZkRequestTimeout, &wake_);
    if (below && !below->empty())
      throw not_lock_use(printable(child_path(base_, part)) + " is a semaphore's");
  }
}

// A semaphore on a prefix where a lock is held: its nodes are right below the prefix.
void ZkContention::refuse_lock_layout() {
  auto children = session_.children(base_, false, kZkRequestTimeout, &wake_)
                      .value_or(std::vector<std::string>{});
  for (const auto& child : children)
    if (child != "locks" && child != "leases")
      throw not_semaphore_use(printable(child_path(base_, child)) + " is a lock's");
}

// Lock users store their limit in their nodes; Curator's nodes say nothing about it.
void ZkContention::check_limits(const std::string& dir, const std::vector<std::string>& children,
                                const std::string& ours) {
  for (const auto& child : children) {
    if (child == ours || !checked_.insert(child).second) continue;
    auto node = session_.get(child_path(dir, child), false, kZkRequestTimeout, &wake_);
    if (!node) continue;
    if (auto owner = parse_node_data(node->data); owner && owner->limit != spec_.limit)
      throw limit_conflict(owner->limit, spec_.limit);
  }
}

}  // namespace lk
