#include "net/tls_flags.hpp"

namespace lk {

const FlagInfo kTlsFlags[6] = {
    {.name = "ca-file",
     .env = "CONSUL_CACERT",
     .value = Value::api,
     .help = "CA file for TLS",
     .group = "API Options",
     .after = "token-file"},
    {.name = "ca-path",
     .env = "CONSUL_CAPATH",
     .value = Value::api,
     .help = "Directory of CA certificates for TLS",
     .group = "API Options"},
    {.name = "client-cert",
     .env = "CONSUL_CLIENT_CERT",
     .value = Value::api,
     .help = "Client certificate for TLS",
     .group = "API Options"},
    {.name = "client-key",
     .env = "CONSUL_CLIENT_KEY",
     .value = Value::api,
     .help = "Client key for TLS",
     .group = "API Options"},
    {.name = "tls-server-name",
     .env = "CONSUL_TLS_SERVER_NAME",
     .value = Value::api,
     .help = "Server name to use as the SNI host for TLS",
     .group = "API Options"},
    // Read from the environment only, as Consul does.
    {.name = "consul-http-ssl-verify",
     .env = "CONSUL_HTTP_SSL_VERIFY",
     .value = Value::text,
     .check = [](const std::string& text) { env_bool("CONSUL_HTTP_SSL_VERIFY", text, true); }},
};

TlsOptions tls_options(const FlagValues& values) {
  return {values.text("ca-file"),
          values.text("ca-path"),
          values.text("client-cert"),
          values.text("client-key"),
          values.text("tls-server-name"),
          env_bool("CONSUL_HTTP_SSL_VERIFY", values.text("consul-http-ssl-verify"), true)};
}

}  // namespace lk
