#pragma once
// TLS for https, with OpenSSL: whom to trust and which certificate to show (one context per
// client, made at its first https connection), and a session per connection that checks the
// server's certificate against the name we expect.
#include <memory>
#include <string>

struct ssl_ctx_st;
struct ssl_st;

namespace lk {

struct TlsOptions {
  std::string ca_file, ca_path, client_cert, client_key;
  std::string server_name;  // checked against the server's certificate instead of the URL's host
  bool verify = true;
};

struct SslFree {
  void operator()(ssl_st* ssl) const;
};
using Ssl = std::unique_ptr<ssl_st, SslFree>;

class TlsContext {
 public:
  // Throws Error when a file it names cannot be used.
  explicit TlsContext(const TlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // A client session over `fd` whose server must show a certificate for `name` (a host name or
  // an IP address), unless verification is off.
  Ssl session(int fd, const std::string& name) const;

 private:
  ssl_ctx_st* ctx_;
  bool verify_;
};

// `what`, then why, as OpenSSL says (the first of its queued errors; this empties the queue).
std::string tls_error(const std::string& what);

}  // namespace lk
