#pragma once
// HTTP over libcurl, one connection kept alive per client. A client belongs to one thread.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

// The server could not be reached or did not answer in time: worth retrying.
struct NetworkError : Error {
  using Error::Error;
};

// The server answered with a 5xx: as worth retrying as no answer at all, but not the same thing
// to a user ("503 Service Unavailable" is not "unreachable"). `retry_after` is the server's own
// hint, honoured as far as the deadline at hand allows.
struct ServerUnavailable : NetworkError {
  ServerUnavailable(const std::string& what, std::optional<std::chrono::seconds> retry_after)
      : NetworkError(what), retry_after(retry_after) {}
  std::optional<std::chrono::seconds> retry_after;
};

// A reply whose body passed kMaxReplyBody; the transfer was cut there.
struct ReplyTooLarge : Error {
  using Error::Error;
};

// What may cut a long request short: descriptors to wake on, and whether to go on then.
struct Wake {
  std::vector<int> fds;
  std::function<bool()> keep_going;
};

// Sleeps for `pause`; false, at once, when one of `wake`'s descriptors is readable and it says
// not to go on.
bool pause_unless_woken(std::chrono::milliseconds pause, const Wake* wake);

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
