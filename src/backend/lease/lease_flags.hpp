#pragma once
// The flags lease-backed backends share, and the configuration they make: how long the lease
// lasts (-session-ttl, each backend with its own default and limits), what is stored with the
// hold (-value), and, for those that take a list of servers, where they are (-endpoints).
#include <chrono>
#include <optional>
#include <string>

#include "backend/flag.hpp"
#include "backend/lease/lease_keeper.hpp"
#include "backend/registry.hpp"

namespace lk {

// -session-ttl and -value, in that order (-help puts each where it goes).
extern const FlagInfo kLeaseFlags[2];
// -endpoints: one text, which each backend that takes it reads its own way.
extern const FlagInfo kEndpointsFlags[1];

struct LeasedConfig : BackendConfig {
  std::chrono::nanoseconds session_ttl{};
  std::optional<std::string> value;  // stored with the hold; a holder record when not given

  // Read from the flags; `default_ttl` when -session-ttl is not given.
  void read_lease_flags(const FlagValues& values, std::chrono::nanoseconds default_ttl);
  LeaseOptions lease() const { return {session_ttl, kill_after, monitor_retry, value}; }
};

}  // namespace lk
