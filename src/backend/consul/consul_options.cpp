#include "backend/consul/consul_options.hpp"

#include <algorithm>

#include "net/tls_flags.hpp"
#include "util/duration.hpp"
#include "util/error.hpp"

namespace lk {

using namespace std::chrono_literals;

namespace {

constexpr const char* kApi = "API Options";

// `consul lock`'s own flags and variables; its TLS ones are every https backend's (tls_flags).
const FlagInfo kConsulFlags[] = {
    {.name = "http-addr",
     .env = "CONSUL_HTTP_ADDR",
     .value = Value::api,
     .help = "Address of the Consul agent: host:port, http(s)://host:port or unix:///path",
     .group = kApi,
     .after = "version"},
    {.name = "token",
     .env = "CONSUL_HTTP_TOKEN",
     .value = Value::api,
     .help = "ACL token to use in the request",
     .group = kApi},
    {.name = "token-file",
     .env = "CONSUL_HTTP_TOKEN_FILE",
     .value = Value::api,
     .help = "File containing the ACL token",
     .group = kApi},
    {.name = "datacenter",
     .value = Value::api,
     .help = "Datacenter to query (default: the agent's)",
     .group = kApi,
     .after = "tls-server-name"},
    {.name = "stale", .help = "Let any Consul server answer reads", .group = kApi},
    {.name = "lock-delay",
     .value = Value::duration,
     .help = "Consul's lock-delay after the session is invalidated (0 to 60s, default 15s)",
     .group = "Network Options",
     .after = "session-ttl"},
    {.name = "session-checks",
     .value = Value::text,
     .help = "Agent check IDs, comma-separated, whose failure makes Consul invalidate the session "
             "(default serfHealth; empty: none)",
     .group = "Network Options",
     .after = "lock-delay"},
    // Read from the environment only, as Consul does.
    {.name = "consul-http-ssl",
     .env = "CONSUL_HTTP_SSL",
     .value = Value::text,
     .check = [](const std::string& text) { env_bool("CONSUL_HTTP_SSL", text, false); }},
};

// "serfHealth, service:web" as {"serfHealth", "service:web"}; "" as none at all.
std::vector<std::string> check_ids(const std::string& text) {
  std::vector<std::string> ids;
  for (std::size_t at = 0; at <= text.size();) {
    std::size_t comma = std::min(text.find(',', at), text.size());
    std::string id = text.substr(at, comma - at);
    id.erase(0, id.find_first_not_of(" \t"));
    id.erase(id.find_last_not_of(" \t") + 1);
    if (!id.empty()) ids.push_back(id);
    at = comma + 1;
  }
  return ids;
}

std::unique_ptr<BackendConfig> configure(const FlagValues& v, const Given& given) {
  auto o = std::make_unique<ConsulOptions>();
  o->read_lease_flags(v, 15s);
  o->client = {v.text("http-addr"),
               tls_options(v),
               env_bool("CONSUL_HTTP_SSL", v.text("consul-http-ssl"), false),
               v.text("token"),
               v.text("datacenter"),
               v.boolean("stale", false)};
  if (o->client.address.empty()) o->client.address = "127.0.0.1:8500";
  o->token_file = v.text("token-file");
  o->lock_delay = v.duration("lock-delay", o->lock_delay);
  if (given("session-checks")) o->session_checks = check_ids(v.text("session-checks"));
  // Consul's own bounds and wording.
  if (o->session_ttl < 10s || o->session_ttl > 24h)
    throw UsageError("Invalid Session TTL '" + format_go_duration(o->session_ttl) +
                     "', must be between [10s=24h0m0s]");
  if (o->lock_delay < 0s || o->lock_delay > 60s)
    throw UsageError("-lock-delay must be between 0s and 60s, not " +
                     format_go_duration(o->lock_delay));
  return o;
}

}  // namespace

const BackendInfo kConsulBackend{
    .name = "consul",
    .companion = "lock-net",
    .flags = rows_of({kConsulFlags, kTlsFlags, kLeaseFlags}),
    // `consul lock`'s API flags: any of them alone selects the consul backend, as it would.
    .selecting_flags = {"http-addr", "token", "token-file", "ca-file", "ca-path", "client-cert",
                        "client-key", "tls-server-name", "datacenter", "stale"},
    .selecting_env = "CONSUL_HTTP_ADDR",
    .configure = configure};

}  // namespace lk
