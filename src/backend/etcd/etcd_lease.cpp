#include "backend/etcd/etcd_lease.hpp"

#include <thread>

#include "backend/lease/backoff.hpp"
#include "util/duration.hpp"
#include "util/log.hpp"

namespace lk {

using nlohmann::json;

EtcdLease::EtcdLease(const EtcdConfig& config, LeaseTiming timing, Deadline ask_by)
    : client_(config) {
  auto ttl_seconds = std::chrono::duration_cast<std::chrono::seconds>(timing.ttl).count();
  auto sent = Clock::now();
  auto asking = ask_by.left(std::chrono::seconds(5));
  LeaseGrant grant = client_.call("lease grant", "/v3/lease/grant", {{"TTL", ttl_seconds}},
                                  std::max(asking, kReleaseBudget), decode_lease_grant, nullptr,
                                  Deadline::after(asking));
  id_ = grant.id;
  // etcd may grant a longer TTL than asked (its minimum), never a shorter one: counting with
  // ours stays on the safe side.
  ttl_ = std::chrono::seconds(std::max<std::int64_t>(grant.ttl, ttl_seconds));
  verbose("etcd at {} granted lease {:x} with a TTL of {}s", client_.endpoint(), id_, grant.ttl);

  // The keeper's thread has a connection of its own.
  auto keeper_client = std::make_shared<EtcdClient>(config);
  std::int64_t id = id_;
  keeper_ = std::make_unique<LeaseKeeper>(
      timing, sent, [keeper_client, id](std::chrono::milliseconds timeout, const Wake& stop) {
        KeepAlive reply = keeper_client->call(
            "lease keepalive", "/v3/lease/keepalive", {{"ID", std::to_string(id)}}, timeout,
            [id](std::string_view body) { return decode_keepalive(body, id); }, &stop);
        std::string where = keeper_client->where("lease keepalive");
        if (reply.error && reply.error->code == 14)
          throw ServerUnavailable(where + reply.error->message, std::nullopt);
        if (reply.error && reply.error->code != 5)
          throw EtcdError(where + reply.error->message, reply.error->code);
        // etcd answers a keepalive for a lease it no longer has with no TTL at all.
        if (reply.error || reply.ttl == 0)
          throw LeaseGone(
              fmt::format("etcd says lease {:x} no longer exists (revoked or expired)", id));
      });
}

EtcdLease::~EtcdLease() { revoke(Deadline::after(kReleaseBudget)); }

// Renewals stop first (one in flight ends at once). The keeper's thread is joined only once the
// revoke is answered: it winds down during the round trip, not before it.
void EtcdLease::revoke(Deadline budget) {
  if (revoked_) return;
  revoked_ = true;
  keeper_->stop_soon();
  std::optional<std::string> failure = send_revoke(budget);
  keeper_->stop();
  if (failure && keeper_->may_be_gone())  // the hold was lost: the lease may be gone already
    verbose("{}", *failure);
  else if (failure)
    fmt::print(stderr, "lock: {}; lease {:x} and our key expire by themselves within {}\n",
               *failure, id_, format_go_duration(ttl_));
}

// What went wrong, if the lease may still be there.
std::optional<std::string> EtcdLease::send_revoke(Deadline budget) {
  std::string failure;
  Backoff backoff(std::chrono::milliseconds(50), std::chrono::milliseconds(500));
  while (true) {
    try {
      client_.call("lease revoke", "/v3/lease/revoke", {{"ID", std::to_string(id_)}},
                   budget.left(kReleaseBudget), decode_header);
      verbose("revoked lease {:x}", id_);
      return std::nullopt;
    } catch (const EtcdError& e) {
      if (e.code == 5)
        return std::nullopt;  // NotFound: expired or revoked by someone else, gone all the same
      return e.what();        // etcd said no (permissions, say): asking again changes nothing
    } catch (const NetworkError& e) {  // 5xx or no answer: worth another try while time is left
      failure = e.what();
    } catch (const std::exception& e) {  // ours, or out of memory: this runs in a destructor too
      return e.what();
    }
    auto pause = backoff.next();
    if (budget.left(kReleaseBudget) <= pause) return failure;
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace lk
