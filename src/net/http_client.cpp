#include "net/http_client.hpp"

#include <algorithm>
#include <cctype>

#include "net/response_reader.hpp"
#include "util/deadline.hpp"

namespace lk {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What part of the request it is, should it hold a line break or other control character that
// would let it write headers of its own (a token read from a file, say).
void check_printable(std::string_view text, const char* what) {
  if (std::any_of(text.begin(), text.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    throw Error(std::string("refusing to send a request whose ") + what +
                " holds a control character");
}

struct BaseUrl {
  bool tls = false;
  std::string host, port, authority, path;
};

// scheme://host[:port][/path], the host possibly an IPv6 address in brackets.
BaseUrl parse_base_url(const std::string& url) {
  auto bad = [&](const std::string& why) {
    return Error("\"" + url + "\" is not a server address: " + why);
  };
  BaseUrl b;
  auto sep = url.find("://");
  if (sep == std::string::npos) throw bad("no scheme (http:// or https://)");
  std::string scheme = lower(url.substr(0, sep));
  if (scheme != "http" && scheme != "https") throw bad("the scheme is neither http nor https");
  b.tls = scheme == "https";
  std::string rest = url.substr(sep + 3);
  auto slash = rest.find('/');
  b.authority = rest.substr(0, slash);
  if (slash != std::string::npos) b.path = rest.substr(slash);
  while (b.path.ends_with('/')) b.path.pop_back();
  if (b.authority.find('@') != std::string::npos) throw bad("user names are not supported");
  std::string after;
  if (b.authority.starts_with('[')) {
    auto close = b.authority.find(']');
    if (close == std::string::npos) throw bad("the IPv6 address has no closing bracket");
    b.host = b.authority.substr(1, close - 1);
    after = b.authority.substr(close + 1);
  } else {
    auto colon = b.authority.find(':');
    b.host = b.authority.substr(0, colon);
    if (colon != std::string::npos) after = b.authority.substr(colon);
  }
  if (!after.empty()) {
    b.port = after.substr(1);
    if (after[0] != ':' || b.port.empty() || b.port.size() > 5 ||
        b.port.find_first_not_of("0123456789") != std::string::npos || std::stoi(b.port) > 65535)
      throw bad("the port is not a number from 0 to 65535");
  }
  if (b.port.empty()) b.port = b.tls ? "443" : "80";
  if (b.host.empty()) throw bad("no host");
  check_printable(url, "address");
  return b;
}

}  // namespace

HttpClient::HttpClient(Endpoint endpoint) : endpoint_(std::move(endpoint)) {
  BaseUrl url = parse_base_url(endpoint_.base_url);
  address_ = {url.host, url.port, endpoint_.unix_socket, url.tls,
              endpoint_.tls.server_name.empty() ? url.host : endpoint_.tls.server_name};
  host_ = url.authority;
  path_prefix_ = url.path;
}

HttpClient::~HttpClient() = default;

std::string HttpClient::request_text(const std::string& method, const std::string& path,
                                     const std::string& body,
                                     const std::vector<std::string>& headers) const {
  check_printable(method, "method");
  check_printable(path, "path");
  std::string text = method + " " + path_prefix_ + path + " HTTP/1.1\r\nHost: " + host_ + "\r\n";
  if (!body.empty() || (method != "GET" && method != "HEAD"))
    text += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  for (const std::string& h : headers) {
    check_printable(h, "header");
    text += h + "\r\n";
  }
  return text + "\r\n" + body;
}

// Sends the request and reads the reply on the kept connection, or on a new one when there is
// none or the server closed the kept one. False when the wait was cut short.
bool HttpClient::exchange(const std::string& request, ResponseReader& reader, IoWait& wait,
                          Deadline sent_by, Deadline answered_by) {
  if (connection_ && !connection_->still_open()) connection_.reset();
  bool reused = connection_ != nullptr;
  for (;;) {
    wait.set_deadline(sent_by);
    try {
      if (!connection_) {
        if (address_.tls && !tls_) tls_ = std::make_unique<TlsContext>(endpoint_.tls);
        connection_ = Connection::open(address_, tls_.get(), wait);
        if (!connection_) return false;
      }
      bool sent = connection_->write_all(request, wait);
      wait.set_deadline(answered_by);
      if (!sent || !read_reply(reader, wait)) {
        connection_.reset();  // what is left of the reply would come before the next one
        return false;
      }
      if (!reader.keep_alive()) connection_.reset();
      return true;
    } catch (const ConnectionLost&) {
      connection_.reset();
      // A kept connection the server closed as we sent: nothing of the request was answered, so
      // it goes once more on a new connection, as browsers and libcurl do.
      if (!reused || reader.started()) throw;
      reused = false;
    } catch (...) {
      connection_.reset();
      throw;
    }
  }
}

bool HttpClient::read_reply(ResponseReader& reader, IoWait& wait) {
  char buffer[16384];
  while (!reader.done()) {
    auto n = connection_->read_some(buffer, sizeof buffer, wait);
    if (!n) return false;
    if (*n == 0) {
      if (!reader.started())
        throw ConnectionLost("the server closed the connection without a reply");
      reader.end_of_stream();
      return true;
    }
    reader.feed(std::string_view(buffer, *n));
    if (reader.stopped()) return false;
  }
  return true;
}

HttpResponse HttpClient::request(const std::string& method, const std::string& path,
                                 const std::string& body, std::chrono::milliseconds timeout,
                                 const std::vector<std::string>& headers) {
  return *request_until(method, path, body, timeout, headers, {}, [] { return true; });
}

std::optional<HttpResponse> HttpClient::request_until(
    const std::string& method, const std::string& path, const std::string& body,
    std::chrono::milliseconds timeout, const std::vector<std::string>& headers,
    const std::vector<int>& wake_fds, const std::function<bool()>& keep_going) {
  Deadline by = Deadline::after(std::max(timeout, std::chrono::milliseconds(1)));
  IoWait wait(by, wake_fds, keep_going);
  HttpResponse response;
  ResponseReader reader(
      response,
      [&](std::string_view data) {
        response.body.append(data);
        return true;
      },
      kMaxReplyBody, method == "HEAD");
  if (!exchange(request_text(method, path, body, headers), reader, wait, by, by))
    return std::nullopt;
  return response;
}

long HttpClient::stream(const std::string& method, const std::string& path, const std::string& body,
                        const std::function<bool(std::string_view)>& on_data,
                        const std::vector<int>& wake_fds, const std::function<bool()>& keep_going,
                        const std::vector<std::string>& headers) {
  Deadline sent_by = Deadline::after(kStreamSendTimeout);
  IoWait wait(sent_by, wake_fds, keep_going);
  HttpResponse head;
  ResponseReader reader(head, on_data, std::nullopt);
  exchange(request_text(method, path, body, headers), reader, wait, sent_by, Deadline::never());
  return head.status;
}

}  // namespace lk
