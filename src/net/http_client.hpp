#pragma once
// HTTP/1.1 to one server, one connection kept alive from request to request. A client belongs to
// one thread. Every wait can be cut short by our own descriptors (signals, the lease keeper).
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/connection.hpp"
#include "net/http_response.hpp"
#include "net/tls.hpp"
#include "net/wake.hpp"
#include "util/deadline.hpp"

namespace lk {

// Where a server is: a base URL (scheme, host and port) or a unix socket, and how to trust it.
struct Endpoint {
  std::string base_url;     // e.g. http://127.0.0.1:8500, without a trailing slash
  std::string unix_socket;  // when not empty, connect here; base_url then only names the scheme
  TlsOptions tls;
};

class ResponseReader;

constexpr std::chrono::seconds kStreamSendTimeout{30};

// Its messages say what went wrong, not where: the caller names the server and the request. A
// request sent on a kept connection that the server closes without answering goes once more on
// a new one, as libcurl and browsers do: the server may then see it twice.
class HttpClient {
 public:
  // Throws Error when the base URL is not one.
  explicit HttpClient(Endpoint endpoint);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request and returns whatever status came back; throws NetworkError when none did
  // within `timeout`, ReplyTooLarge past kMaxReplyBody. Headers are "Name: value".
  HttpResponse request(const std::string& method, const std::string& path, const std::string& body,
                       std::chrono::milliseconds timeout,
                       const std::vector<std::string>& headers = {});

  // Sends a request whose answer is a stream: each piece of the body goes to `on_data` as it
  // arrives, until the server ends it, `on_data` returns false, or `keep_going` returns false.
  // Connecting and sending must be done within kStreamSendTimeout; the answer has no deadline.
  // `keep_going` is asked whenever one of `wake_fds` is readable, and at least once a second.
  // Returns the status (0 when none came); throws NetworkError when the connection failed.
  long stream(const std::string& method, const std::string& path, const std::string& body,
              const std::function<bool(std::string_view)>& on_data,
              const std::vector<int>& wake_fds, const std::function<bool()>& keep_going,
              const std::vector<std::string>& headers = {});

  // request(), cut short (nullopt) when `keep_going`, asked as for stream(), returns false.
  std::optional<HttpResponse> request_until(const std::string& method, const std::string& path,
                                            const std::string& body,
                                            std::chrono::milliseconds timeout,
                                            const std::vector<std::string>& headers,
                                            const std::vector<int>& wake_fds,
                                            const std::function<bool()>& keep_going);

  const Endpoint& endpoint() const { return endpoint_; }

 private:
  std::string request_text(const std::string& method, const std::string& path,
                           const std::string& body, const std::vector<std::string>& headers) const;
  bool exchange(const std::string& request, ResponseReader& reader, IoWait& wait, Deadline sent_by,
                Deadline answered_by);
  bool read_reply(ResponseReader& reader, IoWait& wait);

  Endpoint endpoint_;
  ServerAddress address_;
  std::string host_;                 // the Host header
  std::string path_prefix_;          // a path in the base URL, before every request's own
  std::unique_ptr<TlsContext> tls_;  // made at the first https connection
  std::unique_ptr<Connection> connection_;
};

}  // namespace lk
