#include "backend/etcd/etcd_hold.hpp"

#include <poll.h>

#include <utility>

#include "backend/lease/backoff.hpp"
#include "util/base64.hpp"
#include "util/log.hpp"

namespace lk {

using nlohmann::json;

namespace {
constexpr std::chrono::milliseconds kFirstWatchAfter{100};
}  // namespace

EtcdHold::EtcdHold(const EtcdConfig& config, std::unique_ptr<EtcdLease> lease, Contender me,
                   std::string prefix, std::int64_t held_at)
    : config_(config),
      lease_(std::move(lease)),
      me_(std::move(me)),
      prefix_(std::move(prefix)),
      held_at_(held_at) {
  watcher_ = std::thread([this, held_at] { watch_own_key(held_at); });
}

EtcdHold::~EtcdHold() {
  stop_watch();
  // lease_ revokes itself if release() did not run.
}

EnvVars EtcdHold::child_env() const {
  return {{"LOCK_PREFIX", prefix_},
          {"LOCK_FENCING_TOKEN", std::to_string(me_.create_revision)},
          {"LOCK_KEY", me_.key},
          // etcdctl lock's names, for its users' scripts: its key, and the revision of the reply
          // that showed it holding.
          {"ETCD_LOCK_KEY", me_.key},
          {"ETCD_LOCK_REV", std::to_string(held_at_)}};
}

// Our key written again, on our lease: the watch on it heeds only its deletion.
void EtcdHold::hold_until(const std::string& until) {
  auto value = HolderRecord::with_until(me_.value, until);
  if (!value) return;
  Contender again = me_;
  again.value = *value;
  EtcdClient(config_).call("put", "/v3/kv/put", put_of(again, lease_->id()),
                           std::chrono::seconds(2), decode_header);
}

void EtcdHold::stop_watch_soon() { stop_watch_.notify(); }

void EtcdHold::stop_watch() {
  stop_watch_soon();
  if (watcher_.joinable()) watcher_.join();
}

// Revoking the lease deletes our key with it, in the same write: one write to etcd's disk less
// than a delete and a revoke, on every run. One budget for the whole of it, however etcd fares.
// The watch is told to end first, and joined after: it winds down during the revoke's round
// trip, and the deletion it may still see is ours.
void EtcdHold::release() {
  Deadline budget = Deadline::after(kReleaseBudget);
  stop_watch_soon();
  lease_->revoke(budget);
  stop_watch();
}

// Runs until told to stop. The first stream starts just after `held_at`, the read that showed us
// holding, but only kFirstWatchAfter into the hold: a stream through etcd's gateway costs etcd
// more CPU than all the rest of a run's requests, and most holds in a fleet's burst are shorter;
// a deletion meanwhile is heard as the stream opens, since it starts from `held_at`, and a
// revoked lease also by the next renewal. Each later stream first reads our key outside the
// stream: it must still be the one we created (same create revision), and the watch starts just
// after that read. So no deletion can fall between two streams. A stream that ends soon after it
// opened made no progress, and the next one waits on a backoff: a server that closes streams at
// once must not make us spin.
// A stream that etcd makes behind its own revision hears a deletion up to 100 ms late (see
// wait_deletes in etcd_recipe.cpp). A waiter reads again then, since the whole queue would wait
// on it; here it is kept: making it again would cost a read and a stream on most holds under
// contention, and on every semaphore's (its holder writes its key again as it starts to hold),
// for the notice of our key deleted, or our lease revoked, by someone else within the hold's
// first 100 ms.
void EtcdHold::watch_own_key(std::int64_t held_at) {
  EtcdClient client(config_);
  LeaseKeeper& keeper = lease_->keeper();
  auto stopping = [&] {
    pollfd p{stop_watch_.fd(), POLLIN, 0};
    return poll(&p, 1, 0) > 0 || keeper.reason().has_value();
  };
  Wake wake{{stop_watch_.fd(), keeper.loss_fd()}, [&] { return !stopping(); }};
  Backoff backoff;
  pollfd first[] = {{stop_watch_.fd(), POLLIN, 0}, {keeper.loss_fd(), POLLIN, 0}};
  poll(first, 2, static_cast<int>(kFirstWatchAfter.count()));
  while (!stopping()) {
    auto opened = Clock::now();
    try {
      std::int64_t seen_at = std::exchange(held_at, 0);
      if (!seen_at) {
        RangeReply r = client.call(
            "range", "/v3/kv/range", {{"key", base64_encode(me_.key)}, {"keys_only", true}},
            std::chrono::seconds(5),
            [&](std::string_view body) { return decode_range(body, me_.key); }, &wake);
        if (r.kvs.empty() || r.kvs[0].create_revision != me_.create_revision) {
          if (stopping()) return;  // our own revoke
          return keeper.lose("our key " + me_.key +
                             " is gone (lease revoked or expired, or removed by hand)");
        }
        seen_at = r.revision;
      }
      json request = {{"key", base64_encode(me_.key)},
                      {"start_revision", std::to_string(seen_at + 1)}};
      client.watch(
          request,
          [&](const WatchMessage& m) {
            if (m.canceled && m.compact_revision == 0) throw client.watch_refused(m);
            for (const WatchEvent& event : m.events) {
              if (event.deleted) {
                if (stopping()) return false;  // our own revoke
                keeper.lose("our key " + me_.key +
                            " was deleted (lease revoked or expired, or removed by hand)");
                return false;
              }
            }
            return !m.canceled;  // compacted: read the key again
          },
          wake);
      if (stopping()) return;
      if (Clock::now() - opened >= backoff.cap()) {
        backoff.reset();
        continue;
      }
    } catch (const std::exception& e) {
      if (stopping()) return;  // cut short by release(), or by a loss the keeper has told
      verbose("watching {} failed ({})", me_.key, e.what());
    }
    auto pause = backoff.next();
    verbose("watching {} again in {}ms", me_.key, pause.count());
    pollfd p{stop_watch_.fd(), POLLIN, 0};
    poll(&p, 1, static_cast<int>(pause.count()));
  }
}

}  // namespace lk
