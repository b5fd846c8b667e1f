#pragma once
// The TLS flags of every backend that speaks https: `consul lock`'s, which etcd takes as well.
#include "backend/flag.hpp"
#include "net/tls.hpp"

namespace lk {

// -ca-file, -ca-path, -client-cert, -client-key, -tls-server-name, in -help's order, and
// CONSUL_HTTP_SSL_VERIFY.
extern const FlagInfo kTlsFlags[6];

// What they say, for a backend that reads them as given (their variables are Consul's).
TlsOptions tls_options(const FlagValues& values);

}  // namespace lk
