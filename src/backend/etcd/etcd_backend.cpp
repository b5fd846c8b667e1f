#include "backend/etcd/etcd_backend.hpp"

#include "backend/etcd/etcd_hold.hpp"
#include "backend/etcd/etcd_lease.hpp"
#include "backend/etcd/etcd_queue.hpp"
#include "backend/lease/lease_wait.hpp"
#include "cli/duration.hpp"
#include "net/base64.hpp"
#include "util/log.hpp"

namespace lk {
namespace {

using nlohmann::json;

struct Queue {
  std::vector<Contender> contenders;  // by create revision
  std::int64_t revision = 0;          // the store's revision when it was read
};

// Everything under "<prefix>/" (up to `max_revision` when not 0), oldest first.
Queue read_queue(EtcdClient& client, const std::string& prefix, std::int64_t max_revision,
                 bool with_values) {
  std::string from = prefix + "/";
  json request = {{"key", base64_encode(from)},
                  {"range_end", base64_encode(prefix_end(from))},
                  {"sort_order", "ASCEND"},
                  {"sort_target", "CREATE"},
                  {"keys_only", !with_values}};
  if (max_revision) request["max_create_revision"] = std::to_string(max_revision);
  json reply = client.call("/v3/kv/range", request);
  Queue q;
  q.revision = etcd_int(reply.value("header", json::object()), "revision");
  for (const json& kv : reply.value("kvs", json::array()))
    if (auto c = parse_contender(prefix, etcd_kv(kv))) q.contenders.push_back(std::move(*c));
  return q;
}

HolderRecord record_of(const std::string& prefix, const Contender& c) {
  HolderRecord r;
  try {
    r = HolderRecord::from_json(c.value);
  } catch (const Error&) {
    // etcdctl's keys are empty; -value may be anything.
    r.prefix = prefix;
    r.name = c.value.empty() ? c.key : c.value;
  }
  r.token = static_cast<std::uint64_t>(c.create_revision);
  return r;
}

// One look at the queue: true when we hold; otherwise waits on one watch until something that
// may let us in happens (or `keep_waiting` says stop), and returns false to look again.
bool wait_turn(EtcdClient& client, const LockSpec& spec, const Contender& me, LeaseWait& wait) {
  Queue q = read_queue(client, spec.prefix, me.create_revision, verbose_enabled());
  if (q.contenders.empty() || q.contenders.back().key != me.key)
    throw Error("our key " + me.key + " vanished while we waited (lease expired or revoked)");
  Position pos = position_in(q.contenders, me.create_revision, spec.limit);
  if (pos.ahead < spec.limit) {
    verbose("acquired {} (revision {}): {} ahead of us, {} allowed", me.key, me.create_revision,
            pos.ahead, spec.limit);
    return true;
  }
  bool head = spec.limit > 1 && pos.ahead == spec.limit;
  json watch;
  if (head) {
    std::string from = spec.prefix + "/";
    watch = {{"key", base64_encode(from)}, {"range_end", base64_encode(prefix_end(from))},
             {"filters", {"NOPUT"}}, {"prev_kv", true}};
  } else {
    watch = {{"key", base64_encode(pos.predecessor->key)}};
  }
  watch["start_revision"] = std::to_string(q.revision + 1);
  verbose("waiting with {} ahead of us; {}", pos.ahead,
          head ? "first in line, so any holder's release lets us in"
               : "behind " + pos.predecessor->key + " (" + record_of(spec.prefix, *pos.predecessor).name + ")");
  bool changed = false;
  Wake wake = wait.wake();
  client.watch(watch, [&](const json& result) {
    for (const json& event : result.value("events", json::array())) {
      bool deleted = event.value("type", "PUT") == "DELETE";
      if (head)
        changed = deleted && etcd_int(event.value("prev_kv", json::object()), "create_revision") <
                                 me.create_revision;
      else
        changed = deleted || spec.limit > 1;  // a semaphore's predecessor writes when it holds
      if (changed) return false;
    }
    if (auto why = cancel_reason(result)) throw EtcdError("etcd ended our watch: " + *why, 0);
    changed = result.value("canceled", false);  // compacted away: read the queue again
    return !changed;
  }, wake.fds, wake.keep_going);
  return false;
}

}  // namespace

PrefixStatus EtcdBackend::status(const std::string& prefix) {
  EtcdClient client(config_.client);
  Queue q = read_queue(client, prefix, 0, true);
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
    return queue_and_wait(spec, deadline, interrupt);
  } catch (const NetworkError&) {
    // A request cut short by -timeout is the timeout, not a fault of etcd's.
    if (deadline.passed()) throw AcquireTimeout("timed out waiting for prefix '" + spec.prefix + "'");
    throw;
  }
}

std::unique_ptr<Hold> EtcdBackend::queue_and_wait(const LockSpec& spec, Deadline deadline,
                                                  const Interrupt& interrupt) {
  LeaseTiming timing = config_.lease.timing();
  // -timeout bounds the whole wait, the requests before it included.
  auto budget = [&] { return deadline.left(std::chrono::seconds(5)); };
  auto lease = std::make_unique<EtcdLease>(config_.client, timing, budget());
  EtcdClient client(config_.client);

  HolderRecord record = HolderRecord::for_this_process(spec.prefix, spec.session_name);
  Contender me{contender_key(spec.prefix, lease->id(), spec.limit), 0, spec.limit,
               config_.lease.value.value_or(record.to_json())};
  // As etcd's mutex does: put only if absent, else read. A put that timed out may still have
  // been applied; its retry then finds our key and its revision instead of queueing twice.
  json kv = {{"key", base64_encode(me.key)},
             {"value", base64_encode(me.value)},
             {"lease", std::to_string(lease->id())}};
  json txn = {{"compare", {{{"target", "CREATE"}, {"key", kv["key"]}, {"create_revision", "0"},
                            {"result", "EQUAL"}}}},
              {"success", {{{"request_put", kv}}}},
              {"failure", {{{"request_range", {{"key", kv["key"]}}}}}}};
  json reply = client.call("/v3/kv/txn", txn, budget());
  if (reply.value("succeeded", false)) {
    me.create_revision = etcd_int(reply["header"], "revision");
  } else {
    auto found = reply["responses"][0]["response_range"].value("kvs", json::array());
    if (found.empty()) throw Error("etcd lost our key " + me.key + " as we queued");
    me.create_revision = etcd_kv(found[0]).create_revision;
  }
  verbose("queued as {} (revision {})", me.key, me.create_revision);

  LeaseWait wait(deadline, interrupt, lease->keeper());
  while (wait.keep_going()) {
    try {
      if (wait_turn(client, spec, me, wait)) {
        // Written again so that the waiter just behind us learns that we hold (etcd_queue.hpp).
        if (spec.limit > 1) client.call("/v3/kv/put", kv);
        return std::make_unique<EtcdHold>(config_.client, std::move(lease), me, spec.prefix);
      }
    } catch (const NetworkError& e) {
      // The lease lives on while the keeper can renew it; the queue is read again once etcd answers.
      verbose("{}; trying again in 1s", e.what());
      wait.pause(std::chrono::seconds(1));
    }
  }
  wait.throw_why(spec.prefix);
}

}  // namespace lk
