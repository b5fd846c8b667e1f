#include "backend/consul/consul_session.hpp"

#include "cli/duration.hpp"
#include "util/log.hpp"

namespace lk {

ConsulSession::ConsulSession(const ConsulConfig& config, const nlohmann::json& request,
                             LeaseTiming timing)
    : client_(config) {
  auto sent = Clock::now();
  id_ = client_.create_session(request);
  verbose("Consul agent at {} created session {} ({}); renewing every {}", client_.address(), id_,
          request.dump(), format_go_duration(timing.renew_every));
  auto keeper_client = std::make_shared<ConsulClient>(config);  // the keeper thread's own
  std::string id = id_;
  keeper_ = std::make_unique<LeaseKeeper>(timing, sent, [keeper_client, id](std::chrono::milliseconds timeout) {
    keeper_client->renew_session(id, timeout);
  });
}

ConsulSession::~ConsulSession() { destroy(); }

void ConsulSession::destroy() {
  if (destroyed_) return;
  destroyed_ = true;
  keeper_->stop();
  try {
    client_.destroy_session(id_);
    verbose("destroyed session {}", id_);
  } catch (const Error& e) {
    verbose("could not destroy session {} ({}); it expires by itself", id_, e.what());
  }
}

}  // namespace lk
