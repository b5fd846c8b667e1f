#pragma once
// The Consul backend's lease, which Consul calls a session: created on construction, renewed by a
// LeaseKeeper, destroyed on destroy() or destruction (which releases or deletes whatever it
// holds, at once).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/consul/consul_cleanup.hpp"
#include "backend/consul/consul_client.hpp"
#include "backend/lease/lease_keeper.hpp"
#include "net/wake.hpp"

namespace lk {

class ConsulSession {
 public:
  // A 5xx with a Retry-After that ends before `deadline` is waited out, unless `wake` says stop
  // (Cancelled).
  ConsulSession(const ConsulConfig& config, const nlohmann::json& request, LeaseTiming timing,
                Deadline deadline, const Wake& wake);
  // Destroys the session within kReleaseBudget if destroy() did not; says so when it cannot.
  ~ConsulSession();
  ConsulSession(const ConsulSession&) = delete;
  ConsulSession& operator=(const ConsulSession&) = delete;

  const std::string& id() const { return id_; }
  LeaseKeeper& keeper() { return *keeper_; }
  // What is left when the session could not be destroyed, for Cleanup::report.
  std::string left_behind() const;
  // Stops renewing; returns once no renewal is under way.
  void stop_renewing() { keeper_->stop(); }
  // Stops renewing and destroys the session within the cleanup's time. False when it could not
  // (the session then expires by itself after its TTL).
  bool destroy(Cleanup& cleanup);

 private:
  ConsulClient client_;
  std::string id_;
  std::chrono::nanoseconds ttl_;
  std::unique_ptr<LeaseKeeper> keeper_;
  bool destroyed_ = false;
};

}  // namespace lk
