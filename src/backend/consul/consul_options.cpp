#include <chrono>

#include "backend/backends.hpp"
#include "util/duration.hpp"
#include "util/error.hpp"

namespace lk {

using namespace std::chrono_literals;

const BackendInfo kConsulBackend{
    .name = "consul",
    .companion = "lock-net",
    .own_flags = {"http-addr", "token", "token-file", "datacenter", "stale", "lock-delay", "ca-file",
                  "ca-path", "client-cert", "client-key", "tls-server-name", "session-ttl", "value"},
    // `consul lock`'s API flags: any of them alone selects the consul backend, as it would.
    .selecting_flags = {"http-addr", "token", "token-file", "ca-file", "ca-path", "client-cert",
                        "client-key", "tls-server-name", "datacenter", "stale"},
    .selecting_env = "CONSUL_HTTP_ADDR",
    .configure = [](Options& o, const Given&) {
      if (o.session_ttl.count() == 0) o.session_ttl = 15s;
      // Consul's own bounds and wording.
      if (o.session_ttl < 10s || o.session_ttl > 24h)
        throw UsageError("Invalid Session TTL '" + format_go_duration(o.session_ttl) +
                         "', must be between [10s=24h0m0s]");
      if (o.lock_delay < 0s || o.lock_delay > 60s)
        throw UsageError("-lock-delay must be between 0s and 60s, not " + format_go_duration(o.lock_delay));
    }};

}  // namespace lk
