#include "backend/etcd/etcd_lease.hpp"

#include "cli/duration.hpp"
#include "util/log.hpp"

namespace lk {

using nlohmann::json;

EtcdLease::EtcdLease(const EtcdConfig& config, LeaseTiming timing,
                     std::chrono::milliseconds grant_timeout)
    : client_(config) {
  auto ttl_seconds = std::chrono::duration_cast<std::chrono::seconds>(timing.ttl).count();
  auto sent = Clock::now();
  json reply = client_.call("/v3/lease/grant", {{"TTL", ttl_seconds}}, grant_timeout);
  id_ = etcd_int(reply, "ID");
  if (!id_) throw Error("etcd granted no lease: " + reply.dump());
  // etcd may grant a longer TTL than asked (its minimum), never a shorter one: counting with
  // ours stays on the safe side.
  verbose("etcd at {} granted lease {:x} with a TTL of {}s; renewing every {}", client_.endpoint(),
          id_, etcd_int(reply, "TTL"), format_go_duration(timing.renew_every));

  // The keeper's thread has a connection of its own.
  auto keeper_client = std::make_shared<EtcdClient>(config);
  std::int64_t id = id_;
  keeper_ = std::make_unique<LeaseKeeper>(timing, sent, [keeper_client, id](std::chrono::milliseconds timeout) {
    json reply = keeper_client->call("/v3/lease/keepalive", {{"ID", std::to_string(id)}}, timeout);
    // etcd answers a keepalive for a lease it no longer has with no TTL at all.
    if (etcd_int(reply.value("result", json::object()), "TTL") <= 0)
      throw LeaseGone(fmt::format("etcd says lease {:x} no longer exists (revoked or expired)", id));
  });
}

EtcdLease::~EtcdLease() { revoke(); }

void EtcdLease::revoke() {
  if (revoked_) return;
  revoked_ = true;
  keeper_->stop();
  try {
    client_.call("/v3/lease/revoke", {{"ID", std::to_string(id_)}}, std::chrono::seconds(1));
    verbose("revoked lease {:x}", id_);
  } catch (const EtcdError& e) {
    // NotFound: expired or revoked by someone else, gone all the same.
    if (e.code != 5) verbose("could not revoke lease {:x} ({}); it expires by itself", id_, e.what());
  } catch (const Error& e) {
    verbose("could not revoke lease {:x} ({}); it expires by itself", id_, e.what());
  }
}

}  // namespace lk
