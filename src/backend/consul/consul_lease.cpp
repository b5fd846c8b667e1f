#include "backend/consul/consul_lease.hpp"

#include "util/duration.hpp"
#include "util/log.hpp"

namespace lk {

ConsulSession::ConsulSession(const ConsulConfig& config, const nlohmann::json& request,
                             LeaseTiming timing, Deadline deadline, const Wake& wake)
    : client_(config), ttl_(timing.ttl) {
  client_.wait_out_retry_after(deadline, &wake);
  auto sent = Clock::now();
  id_ = client_.create_session(request);
  client_.no_retry_after();
  verbose("Consul agent at {} created session {} ({}); renewing every {}", client_.address(), id_,
          request.dump(), format_go_duration(timing.renew_every));
  auto keeper_client = std::make_shared<ConsulClient>(config);  // the keeper thread's own
  std::string id = id_;
  keeper_ = std::make_unique<LeaseKeeper>(
      timing, sent, [keeper_client, id](std::chrono::milliseconds timeout, const Wake& stop) {
        keeper_client->renew_session(id, timeout, stop);
      });
}

ConsulSession::~ConsulSession() {
  if (destroyed_) return;
  Cleanup cleanup(Deadline::after(kReleaseBudget));
  if (!destroy(cleanup)) cleanup.report(left_behind());
}

std::string ConsulSession::left_behind() const {
  return "session " + id_ + " expires by itself after its TTL of " + format_go_duration(ttl_) +
         ", releasing what it holds";
}

bool ConsulSession::destroy(Cleanup& cleanup) {
  if (destroyed_) return true;
  destroyed_ = true;
  keeper_->stop();
  client_.limit(cleanup.until(), kCleanupRequestTimeout);
  if (!cleanup.run([&] { client_.destroy_session(id_); })) return false;
  verbose("destroyed session {}", id_);
  return true;
}

}  // namespace lk
