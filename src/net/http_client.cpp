#include "net/http_client.hpp"

#include <curl/curl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "util/deadline.hpp"

namespace lk {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw Error("cannot initialise libcurl");
  });
}

// Sockets must not leak into the child, which runs while we talk to the server.
curl_socket_t open_cloexec(void*, curlsocktype, curl_sockaddr* a) {
  return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

struct BodyState {
  std::string* body;
  bool too_large = false;
};

size_t append_body(char* data, size_t size, size_t n, void* state) {
  auto* s = static_cast<BodyState*>(state);
  if (s->body->size() + size * n > kMaxReplyBody) {
    s->too_large = true;
    return 0;  // libcurl ends the transfer with a write error
  }
  s->body->append(data, size * n);
  return size * n;
}

// Without a header function, libcurl hands headers to the body's function.
size_t discard(char*, size_t size, size_t n, void*) { return size * n; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

size_t add_header(char* data, size_t size, size_t n, void* out) {
  std::string_view line(data, size * n);
  auto* response = static_cast<HttpResponse*>(out);
  // A new status line (after a 100 Continue, say) starts the headers over.
  if (line.starts_with("HTTP/")) {
    response->headers.clear();
    auto code = line.find(' ');
    auto reason = code == std::string_view::npos ? code : line.find(' ', code + 1);
    response->reason = reason == std::string_view::npos ? "" : std::string(trim(line.substr(reason + 1)));
    return size * n;
  }
  auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    response->headers[name] = std::string(trim(line.substr(colon + 1)));
  }
  return size * n;
}

struct StreamState {
  const std::function<bool(std::string_view)>* on_data;
  bool stopped = false;
};

size_t stream_body(char* data, size_t size, size_t n, void* state) {
  auto* s = static_cast<StreamState*>(state);
  if ((*s->on_data)(std::string_view(data, size * n))) return size * n;
  s->stopped = true;
  return 0;
}

// With a server name to check, the URL names that server and CONNECT_TO says where it really is.
std::string connect_to(const Endpoint& e, std::string& base_url) {
  if (e.tls.server_name.empty()) return "";
  CURLU* u = curl_url();
  std::string rule;
  if (curl_url_set(u, CURLUPART_URL, base_url.c_str(), 0) == CURLUE_OK) {
    char *host = nullptr, *port = nullptr;
    curl_url_get(u, CURLUPART_HOST, &host, 0);
    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
    if (host && port) {
      rule = e.tls.server_name + ":" + port + ":" + host + ":" + port;
      curl_url_set(u, CURLUPART_HOST, e.tls.server_name.c_str(), 0);
      char* url = nullptr;
      if (curl_url_get(u, CURLUPART_URL, &url, 0) == CURLUE_OK) {
        base_url = url;
        if (base_url.ends_with("/")) base_url.pop_back();
      }
      curl_free(url);
    }
    curl_free(host);
    curl_free(port);
  }
  curl_url_cleanup(u);
  return rule;
}

// For HTTP/2, which sends no reason phrase, and servers that leave it out.
std::string_view standard_reason(long status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
  }
}

}  // namespace

std::string HttpResponse::status_text() const {
  std::string_view why = reason.empty() ? standard_reason(status) : std::string_view(reason);
  return why.empty() ? std::to_string(status) : std::to_string(status) + " " + std::string(why);
}

std::optional<std::chrono::seconds> HttpResponse::retry_after() const {
  auto it = headers.find("retry-after");
  if (it == headers.end() || it->second.empty() || it->second.size() > 9) return std::nullopt;
  long seconds = 0;
  for (char c : it->second) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  return std::chrono::seconds(seconds);
}

HttpClient::HttpClient(Endpoint endpoint) : endpoint_(std::move(endpoint)) {
  global_init();
  curl_ = curl_easy_init();
  multi_ = curl_multi_init();  // it keeps the connection from one request to the next
  if (!curl_ || !multi_) throw Error("cannot initialise libcurl");
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // we run threads and own every signal
  curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_cloexec);
  curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  if (!endpoint_.unix_socket.empty())
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, endpoint_.unix_socket.c_str());
  const TlsOptions& t = endpoint_.tls;
  if (!t.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, t.ca_file.c_str());
  if (!t.ca_path.empty()) curl_easy_setopt(c, CURLOPT_CAPATH, t.ca_path.c_str());
  if (!t.client_cert.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT, t.client_cert.c_str());
  if (!t.client_key.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, t.client_key.c_str());
  if (!t.verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  std::string rule = connect_to(endpoint_, endpoint_.base_url);
  if (!rule.empty()) {
    struct curl_slist* list = curl_slist_append(nullptr, rule.c_str());
    curl_easy_setopt(c, CURLOPT_CONNECT_TO, list);
    connect_to_ = list;
  }
}

HttpClient::~HttpClient() {
  curl_multi_cleanup(static_cast<CURLM*>(multi_));
  curl_easy_cleanup(static_cast<CURL*>(curl_));
  curl_slist_free_all(header_list_);
  curl_slist_free_all(connect_to_);
}

void HttpClient::prepare(const std::string& method, const std::string& path,
                         const std::string& body, const std::vector<std::string>& headers) {
  CURL* c = static_cast<CURL*>(curl_);
  std::string url = endpoint_.base_url + path;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method == "GET" ? nullptr : method.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_slist_free_all(header_list_);
  header_list_ = curl_slist_append(nullptr, "Expect:");  // no 100-continue round trip
  for (const auto& h : headers) header_list_ = curl_slist_append(header_list_, h.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, header_list_);
}

HttpResponse HttpClient::request(const std::string& method, const std::string& path,
                                 const std::string& body, std::chrono::milliseconds timeout,
                                 const std::vector<std::string>& headers) {
  return *request_until(method, path, body, timeout, headers, {}, [] { return true; });
}

// Runs the prepared transfer through the multi interface, so that the wait for data also wakes
// on our own descriptors. Returns libcurl's result; `stopped` says keep_going ended it.
int HttpClient::run_multi(const std::vector<int>& wake_fds, const std::function<bool()>& keep_going,
                          bool& stopped) {
  CURL* c = static_cast<CURL*>(curl_);
  CURLM* multi = static_cast<CURLM*>(multi_);
  curl_multi_add_handle(multi, c);
  std::vector<curl_waitfd> extra;
  for (int fd : wake_fds) extra.push_back({fd, CURL_WAIT_POLLIN, 0});
  CURLcode rc = CURLE_OK;
  for (int running = 1; running;) {
    curl_multi_perform(multi, &running);
    if (!running) break;
    int ready = 0;
    for (auto& w : extra) w.revents = 0;
    curl_multi_poll(multi, extra.data(), static_cast<unsigned>(extra.size()), 1000, &ready);
    if (!keep_going()) {
      stopped = true;
      break;
    }
  }
  int queued = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi, &queued))
    if (msg->msg == CURLMSG_DONE) rc = msg->data.result;
  curl_multi_remove_handle(multi, c);
  return rc;
}

std::optional<HttpResponse> HttpClient::request_until(
    const std::string& method, const std::string& path, const std::string& body,
    std::chrono::milliseconds timeout, const std::vector<std::string>& headers,
    const std::vector<int>& wake_fds, const std::function<bool()>& keep_going) {
  CURL* c = static_cast<CURL*>(curl_);
  prepare(method, path, body, headers);
  HttpResponse response;
  BodyState body_state{&response.body};
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body_state);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, add_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &response);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<long>(timeout.count(), 1)));
  bool stopped = false;
  auto rc = static_cast<CURLcode>(run_multi(wake_fds, keep_going, stopped));
  if (stopped) return std::nullopt;
  if (body_state.too_large)
    throw ReplyTooLarge("the reply is larger than " + std::to_string(kMaxReplyBody >> 20) + " MiB");
  if (rc != CURLE_OK) throw NetworkError(curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

long HttpClient::stream(const std::string& method, const std::string& path, const std::string& body,
                        const std::function<bool(std::string_view)>& on_data,
                        const std::vector<int>& wake_fds, const std::function<bool()>& keep_going,
                        const std::vector<std::string>& headers) {
  CURL* c = static_cast<CURL*>(curl_);
  prepare(method, path, body, headers);
  StreamState state{&on_data};
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, stream_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, discard);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 0L);
  auto rc = static_cast<CURLcode>(run_multi(wake_fds, keep_going, state.stopped));
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK && !state.stopped)
    throw NetworkError(curl_easy_strerror(rc));
  return status;
}

}  // namespace lk
