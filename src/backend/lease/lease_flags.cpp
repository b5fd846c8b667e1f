#include "backend/lease/lease_flags.hpp"

#include "util/error.hpp"

namespace lk {

const FlagInfo kLeaseFlags[2] = {
    {.name = "session-ttl",
     .value = Value::duration,
     .help = "TTL of the session or lease (consul: 10s to 24h, default 15s; etcd: whole seconds, "
             "default 10s; zookeeper, postgres: default 10s)",
     .group = "Network Options",
     .after = "stale",
     .check =
         [](const std::string& text) {
           if (duration_value("session-ttl", text).count() <= 0)
             throw UsageError("-session-ttl must be positive");
         }},
    {.name = "value",
     .value = Value::text,
     .help = "Value stored with the hold (default: a JSON record of host, pid and name)",
     .group = "Network Options",
     .after = "lock-delay"},
};

const FlagInfo kEndpointsFlags[1] = {
    {.name = "endpoints",
     .env = "ETCDCTL_ENDPOINTS",
     .value = Value::urls,
     .help = "etcd endpoints, comma-separated URLs (default http://127.0.0.1:2379); for ZooKeeper, "
             "host:port[,host:port...][/chroot] (default 127.0.0.1:2181); for PostgreSQL, a "
             "libpq connection string or URI (default: libpq's environment, PGHOST...)",
     .group = "Network Options",
     .after = "value"},
};

void LeasedConfig::read_lease_flags(const FlagValues& values,
                                    std::chrono::nanoseconds default_ttl) {
  session_ttl = values.duration("session-ttl", default_ttl);
  if (const std::string* v = values.find("value")) value = *v;
}

}  // namespace lk
