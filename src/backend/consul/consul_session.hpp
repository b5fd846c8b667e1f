#pragma once
// One Consul session, created on construction, renewed by a LeaseKeeper, destroyed on destroy()
// or destruction (which releases or deletes whatever it holds, at once).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/consul/consul_client.hpp"
#include "backend/lease/lease_keeper.hpp"

namespace lk {

class ConsulSession {
 public:
  ConsulSession(const ConsulConfig& config, const nlohmann::json& request, LeaseTiming timing);
  ~ConsulSession();
  ConsulSession(const ConsulSession&) = delete;
  ConsulSession& operator=(const ConsulSession&) = delete;

  const std::string& id() const { return id_; }
  LeaseKeeper& keeper() { return *keeper_; }
  // Stops renewing and destroys the session; a failure only leaves it to expire (-verbose says).
  void destroy();

 private:
  ConsulClient client_;
  std::string id_;
  std::unique_ptr<LeaseKeeper> keeper_;
  bool destroyed_ = false;
};

}  // namespace lk
