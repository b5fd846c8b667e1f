#include "net/tls.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "util/error.hpp"

namespace lk {
namespace {

bool is_ip_address(const std::string& name) {
  unsigned char addr[16];
  return inet_pton(AF_INET, name.c_str(), addr) == 1 ||
         inet_pton(AF_INET6, name.c_str(), addr) == 1;
}

void check(int ok, const std::string& what) {
  if (ok != 1) throw Error(tls_error(what));
}

}  // namespace

std::string tls_error(const std::string& what) {
  // The earliest error is the cause; the ones after it say where it surfaced.
  const char* reason = nullptr;
  while (unsigned long e = ERR_get_error())
    if (!reason) reason = ERR_reason_error_string(e);
  return reason ? what + ": " + reason : what;
}

void SslFree::operator()(ssl_st* ssl) const { SSL_free(ssl); }

TlsContext::TlsContext(const TlsOptions& o)
    : ctx_(SSL_CTX_new(TLS_client_method())), verify_(o.verify) {
  if (!ctx_) throw Error(tls_error("cannot set up TLS"));
  try {
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    // A server that closes without a TLS goodbye ends the stream; HTTP's framing says whether the
    // reply was whole.
    SSL_CTX_set_options(ctx_, SSL_OP_IGNORE_UNEXPECTED_EOF);
    if (verify_) {
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
      if (o.ca_file.empty() && o.ca_path.empty()) {
        check(SSL_CTX_set_default_verify_paths(ctx_), "cannot load the system's trusted CAs");
      } else {
        // Only the CAs named are trusted, as with Consul's and etcd's own clients.
        check(
            SSL_CTX_load_verify_locations(ctx_, o.ca_file.empty() ? nullptr : o.ca_file.c_str(),
                                          o.ca_path.empty() ? nullptr : o.ca_path.c_str()),
            "cannot load the CA certificates from " + (o.ca_file.empty() ? o.ca_path : o.ca_file));
      }
    }
    if (!o.client_cert.empty()) {
      // Without a key file, the key is looked for in the certificate's file.
      const std::string& key = o.client_key.empty() ? o.client_cert : o.client_key;
      check(SSL_CTX_use_certificate_chain_file(ctx_, o.client_cert.c_str()),
            "cannot use the client certificate " + o.client_cert);
      check(SSL_CTX_use_PrivateKey_file(ctx_, key.c_str(), SSL_FILETYPE_PEM),
            "cannot use the client key " + key);
      check(SSL_CTX_check_private_key(ctx_), "the client key does not match the certificate");
    }
  } catch (...) {
    SSL_CTX_free(ctx_);
    throw;
  }
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Ssl TlsContext::session(int fd, const std::string& name) const {
  Ssl ssl(SSL_new(ctx_));
  if (!ssl || SSL_set_fd(ssl.get(), fd) != 1) throw Error(tls_error("cannot set up TLS"));
  bool ip = is_ip_address(name);
  if (verify_) {
    int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), name.c_str())
                : SSL_set1_host(ssl.get(), name.c_str());
    if (ok != 1) throw Error(tls_error("cannot check the server's certificate for " + name));
  }
  if (!ip && SSL_set_tlsext_host_name(ssl.get(), name.c_str()) != 1)  // SNI names hosts only
    throw Error(tls_error("cannot ask for " + name));
  SSL_set_connect_state(ssl.get());
  return ssl;
}

}  // namespace lk
