#include "backend/etcd/etcd_recipe.hpp"

#include <fmt/format.h>

#include "backend/etcd/etcd_hold.hpp"
#include "backend/lease/backoff.hpp"
#include "util/base64.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {

using nlohmann::json;

QueueRange::QueueRange(const std::string& prefix) : from(prefix + "/"), to(prefix_end(from)) {}

json QueueRange::request(bool with_values, bool newest_first, std::int64_t newest) const {
  json r = {{"key", base64_encode(from)},
            {"range_end", base64_encode(to)},
            {"sort_order", newest_first ? "DESCEND" : "ASCEND"},
            {"sort_target", "CREATE"},
            {"keys_only", !with_values}};
  if (newest > 0) r["limit"] = std::to_string(newest);
  return r;
}

json QueueRange::watch(std::int64_t start_revision) const {
  return {{"key", base64_encode(from)},
          {"range_end", base64_encode(to)},
          {"start_revision", std::to_string(start_revision)}};
}

namespace {

// How many keys a contender reads: its own and the `limit` + 1 just ahead of it, all that its
// turn depends on (etcd_layout.hpp).
std::int64_t keys_to_read(const LockSpec& spec) { return spec.limit + 2; }

// The contenders of `reply` (keys in create-revision order), up to `max_revision` when not 0.
Queue queue_of(const std::string& prefix, const RangeReply& reply, std::int64_t max_revision) {
  Queue q;
  q.revision = reply.revision;
  for (const KeyValue& kv : reply.kvs) {
    if (max_revision && kv.create_revision > max_revision) break;
    if (auto c = parse_contender(prefix, kv)) q.contenders.push_back(std::move(*c));
  }
  return q;
}

// Whether a read of the newest `asked` keys came back full with some that are no contender's
// (a longer prefix's, "<prefix>/a/b"): it may then hold fewer contenders than a turn needs,
// while more wait further back. Such a read is made again whole.
bool window_short(const RangeReply& read, const Queue& q, std::int64_t asked) {
  return static_cast<std::int64_t>(read.kvs.size()) >= asked &&
         q.contenders.size() < read.kvs.size();
}

// How one look at the queue ended.
enum class Turn {
  held,     // fewer than the limit ahead of us
  changed,  // something that may let us in happened: look again at once
  quiet,    // the watch ended (or was cut short) with no such news
  behind,   // the watch began behind etcd's revision, so etcd would be slow to tell us
};

// How many looks in a row may end `behind` before we keep such a watch all the same: on an etcd
// that others write to all the time, every watch is made behind, and reading again would never
// end.
constexpr int kLooksBehind = 3;

// waitDeletes, one look at the queue `q`, as just read: we hold, or we wait on one watch until
// something that may let us in happens, the stream ends, or `wake` says stop.
//
// The watch starts just after the revision `q` was read at, so that nothing that happens after
// the read is missed. But when etcd has moved past that revision by the time the watch is made
// (any write moves it on: a contender that came or went, or a key anywhere else), etcd serves the
// watch from its history, which it looks through only every 100 ms, until the watch has caught
// up: a release in that time reaches us up to 100 ms late, and the whole queue waits that long.
// The message that says the watch is made carries etcd's revision (read just before etcd made it:
// a write in between goes unseen, and that watch lags); unless `may_lag`, a watch made behind
// ends there (`behind`), and we read the queue again, which is quicker.
//
// Only the next in line does so: the one whose predecessor holds. One further back is a whole
// hold or more from its turn, and by then etcd has caught its watch up. Were every waiter to
// read again, a burst of N contenders (each one's queueing moves the revision, so nearly every
// watch made meanwhile is behind) would cost up to 2 × kLooksBehind more requests each, and the
// server's work per contender would grow with N.
Turn wait_deletes(EtcdClient& client, const LockSpec& spec, const Contender& me, const Queue& q,
                  const Wake& wake, bool may_lag) {
  if (q.contenders.empty() || q.contenders.back().key != me.key ||
      q.contenders.back().create_revision != me.create_revision)
    throw Error("our key " + me.key + " vanished while we waited (lease expired or revoked)");
  Position pos = position_in(q.contenders, me.create_revision, spec.limit);
  if (pos.ahead < spec.limit) {
    verbose("acquired {} (revision {}): {} ahead of us, {} allowed", me.key, me.create_revision,
            pos.ahead, spec.limit);
    return Turn::held;
  }
  bool head = spec.limit > 1 && pos.ahead == spec.limit;
  bool next_in_line = pos.ahead == spec.limit;  // a holder's release lets us in
  json watch;
  if (head) {
    watch = QueueRange(spec.prefix).watch(q.revision + 1);
    watch["filters"] = {"NOPUT"};
    watch["prev_kv"] = true;
  } else {
    watch = {{"key", base64_encode(pos.predecessor->key)},
             {"start_revision", std::to_string(q.revision + 1)}};
  }
  verbose(
      "waiting with {} ahead of us; {}",
      pos.ahead > spec.limit ? fmt::format("more than {}", spec.limit) : std::to_string(pos.ahead),
      head ? "first in line, so any holder's release lets us in"
           : "behind " + printable(pos.predecessor->key) + " (" +
                 printable(holder_of_contender(spec.prefix, *pos.predecessor).name) + ")");
  Turn turn = Turn::quiet;
  client.watch(
      watch,
      [&](const WatchMessage& m) {
        if (m.created && !m.canceled && m.revision > q.revision && next_in_line && !may_lag) {
          verbose("etcd is at revision {} already, past the queue we read: reading it again",
                  m.revision);
          turn = Turn::behind;
          return false;
        }
        for (const WatchEvent& event : m.events) {
          bool changed;
          if (head)  // a key ahead of us went (a deleted key's create revision is in its prev_kv)
            changed = event.deleted &&
                      (!event.prev_kv || event.prev_kv->create_revision < me.create_revision);
          else
            changed =
                event.deleted || spec.limit > 1;  // a semaphore's predecessor writes when it holds
          if (changed) {
            turn = Turn::changed;
            return false;
          }
        }
        if (m.canceled && m.compact_revision == 0) throw client.watch_refused(m);
        if (m.canceled) turn = Turn::changed;  // compacted away: read the queue again
        return !m.canceled;
      },
      wake);
  return turn;
}

// Mutex.tryAcquire, as etcd's mutex does it: put only if absent, and read the queue in the same
// transaction. A put that timed out may still have been applied; its retry then finds our key
// and its revision instead of queueing twice. Either way the queue read must hold our key on our
// lease: it shows the key is ours, with a real revision. After our put, ours is the newest key,
// so the newest few are ours and those just ahead; a retry reads the whole queue, since others
// may have queued behind us meanwhile. Sets `me`'s create revision; returns the queue as the
// transaction read it, up to our key, or nothing when that read cannot tell (window_short).
std::optional<Queue> try_acquire(EtcdClient& client, std::int64_t lease_id, const LockSpec& spec,
                                 Contender& me, std::chrono::milliseconds timeout) {
  json kv = put_of(me, lease_id);
  QueueRange range(spec.prefix);
  json txn = {
      {"compare",
       {{{"target", "CREATE"}, {"key", kv["key"]}, {"create_revision", "0"}, {"result", "EQUAL"}}}},
      {"success",
       {{{"request_put", kv}},
        {{"request_range", range.request(verbose_enabled(), true, keys_to_read(spec))}}}},
      {"failure", {{{"request_range", range.request(verbose_enabled(), true)}}}}};
  QueuedKey queued = client.call("txn", "/v3/kv/txn", txn, timeout, [&](std::string_view body) {
    return decode_queue_txn(body, me.key, lease_id, range.from, range.to);
  });
  me.create_revision = queued.create_revision;
  verbose("queued as {} (revision {})", me.key, me.create_revision);
  Queue q = queue_of(spec.prefix, queued.queue, me.create_revision);
  if (queued.created && window_short(queued.queue, q, keys_to_read(spec))) return std::nullopt;
  return q;
}

}  // namespace

Queue read_queue(EtcdClient& client, const std::string& prefix, std::int64_t max_revision,
                 bool with_values, const Wake* wake, std::int64_t newest) {
  QueueRange range(prefix);
  json request = range.request(with_values, newest > 0, newest);
  if (max_revision) request["max_create_revision"] = std::to_string(max_revision);
  RangeReply reply = client.call(
      "range", "/v3/kv/range", request, std::chrono::seconds(5),
      [&](std::string_view body) {
        RangeReply r = decode_range(body, range.from, range.to);
        if (newest > 0) oldest_first(r.kvs);
        else check_create_order(r.kvs);
        if (max_revision && !r.kvs.empty() && r.kvs.back().create_revision > max_revision)
          throw MalformedReply("a key created after the revision asked for");
        return r;
      },
      wake);
  Queue q = queue_of(prefix, reply, max_revision);
  if (newest > 0 && window_short(reply, q, newest))
    return read_queue(client, prefix, max_revision, with_values, wake);
  return q;
}

EtcdContention::EtcdContention(const EtcdBackendConfig& config, const LockSpec& spec,
                               std::unique_ptr<EtcdLease> lease, Deadline deadline, LeaseWait& wait)
    : config_(config),
      spec_(spec),
      lease_(std::move(lease)),
      client_(lease_->client()),
      deadline_(deadline),
      wait_(wait),
      me_{contender_key(spec.prefix, lease_->id(), spec.limit), 0, spec.limit,
          config.lease.value.value_or(
              HolderRecord::for_this_process(spec.prefix, spec.session_name).to_json())} {}

bool EtcdContention::lock(const Queued& queued) {
  if (!wait_.keep_going()) return false;
  // The first look at the queue is the transaction's own read of it. -timeout bounds it too, as
  // it bounds the lease's grant (but see etcd_lease.hpp).
  auto budget = deadline_.left(std::chrono::seconds(5));
  std::optional<Queue> known = try_acquire(client_, lease_->id(), spec_, me_, budget);
  queued();

  Backoff backoff;
  int quick_news = 0;  // looks in a row whose watch brought news as soon as it opened
  int behind = 0;      // looks in a row whose watch began behind etcd
  while (wait_.keep_going()) {
    std::chrono::milliseconds pause;
    try {
      auto opened = Clock::now();
      Wake wake = wait_.wake();
      Queue q = known ? std::move(*known)
                      : read_queue(client_, spec_.prefix, me_.create_revision, verbose_enabled(),
                                   &wake, keys_to_read(spec_));
      known.reset();
      Turn turn = wait_deletes(client_, spec_, me_, q, wake, behind == kLooksBehind);
      behind = turn == Turn::behind ? behind + 1 : 0;
      if (turn == Turn::behind) continue;
      if (turn == Turn::held) {
        held_at_ = q.revision;
        return true;
      }
      // A watch that lasted: look again at once. News that came at once: look again at once,
      // the first time; a server that has news each time at once, or ends each watch at once,
      // is asked again only after a backoff.
      bool lasted = Clock::now() - opened >= backoff.cap();
      quick_news = turn == Turn::changed && !lasted ? quick_news + 1 : 0;
      if (lasted) backoff.reset();
      if (lasted || quick_news == 1) continue;
      pause = backoff.next();
    } catch (const NetworkError& e) {
      // The lease lives on while the keeper can renew it; the queue is read again once etcd
      // answers, or when the server said it would.
      pause = backoff.next();
      if (auto retry_after = retry_after_of(e))
        pause = std::max<std::chrono::milliseconds>(pause, *retry_after);
      verbose("{}; trying again in {}ms", e.what(), pause.count());
    }
    wait_.pause(pause);
  }
  return false;
}

std::unique_ptr<Hold> EtcdContention::hold() {
  // Written again so that the waiter just behind us learns that we hold (etcd_layout.hpp).
  if (spec_.limit > 1)
    client_.call("put", "/v3/kv/put", put_of(me_, lease_->id()), std::chrono::seconds(5),
                 decode_header);
  return std::make_unique<EtcdHold>(config_.client, std::move(lease_), me_, spec_.prefix, held_at_);
}

}  // namespace lk
