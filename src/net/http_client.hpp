#pragma once
// HTTP over libcurl, one connection kept alive per client. A client belongs to one thread.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/wake.hpp"
#include "util/error.hpp"

struct curl_slist;

namespace lk {

struct TlsOptions {
  std::string ca_file, ca_path, client_cert, client_key;
  std::string server_name;  // checked against the server's certificate instead of the URL's host
  bool verify = true;
};

// Where a server is: a base URL (scheme, host and port) or a unix socket, and how to trust it.
struct Endpoint {
  std::string base_url;     // e.g. http://127.0.0.1:8500, without a trailing slash
  std::string unix_socket;  // when not empty, connect here; base_url then only names the scheme
  TlsOptions tls;
};

struct HttpResponse {
  long status = 0;
  std::string reason;  // the status line's reason phrase, when the server sent one
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case

  // "503 Service Unavailable": the status as a user reads it.
  std::string status_text() const;
  // The server's Retry-After, when it is given in seconds (the date form is not honoured).
  std::optional<std::chrono::seconds> retry_after() const;
};

// No reply body is worth more than this: Consul caps a value at 512 KB and etcd a request at
// 1.5 MB, so anything past it is a server gone wrong, and must not grow the process without end.
constexpr std::size_t kMaxReplyBody = 4 << 20;

// A reply whose body passed kMaxReplyBody; the transfer was cut there.
struct ReplyTooLarge : Error {
  using Error::Error;
};

// Its messages say what went wrong, not where: the caller names the server and the request.
class HttpClient {
 public:
  explicit HttpClient(Endpoint endpoint);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request and returns whatever status came back; throws NetworkError when none did
  // within `timeout`, ReplyTooLarge past kMaxReplyBody. Headers are "Name: value".
  HttpResponse request(const std::string& method, const std::string& path, const std::string& body,
                       std::chrono::milliseconds timeout,
                       const std::vector<std::string>& headers = {});

  // Sends a request whose answer is a stream: each chunk goes to `on_data` as it arrives, until
  // the server ends it, `on_data` returns false, or `keep_going` returns false. `keep_going` is
  // asked whenever one of `wake_fds` is readable, and at least once a second. Returns the status;
  // throws NetworkError when the connection failed.
  long stream(const std::string& method, const std::string& path, const std::string& body,
              const std::function<bool(std::string_view)>& on_data, const std::vector<int>& wake_fds,
              const std::function<bool()>& keep_going,
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
  int run_multi(const std::vector<int>& wake_fds, const std::function<bool()>& keep_going,
                bool& stopped);
  void prepare(const std::string& method, const std::string& path, const std::string& body,
               const std::vector<std::string>& headers);

  Endpoint endpoint_;
  void* curl_;   // CURL*
  void* multi_;  // CURLM*: every transfer runs through it, so that waits can wake on our fds
  ::curl_slist* header_list_ = nullptr;
  ::curl_slist* connect_to_ = nullptr;
};

}  // namespace lk
