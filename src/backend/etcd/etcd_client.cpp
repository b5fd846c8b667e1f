#include "backend/etcd/etcd_client.hpp"

#include <exception>
#include <optional>

#include "util/deadline.hpp"
#include "util/log.hpp"

namespace lk {

using nlohmann::json;
using std::chrono::milliseconds;

std::string prefix_end(const std::string& key_prefix) {
  std::string end = key_prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::string(1, '\0');  // the whole key space
  end.back() = static_cast<char>(end.back() + 1);
  return end;
}

EtcdClient::EtcdClient(EtcdConfig config) : config_(std::move(config)) {
  if (config_.endpoints.empty()) throw Error("no etcd endpoint given");
}

EtcdClient::~EtcdClient() = default;

const std::string& EtcdClient::endpoint() const { return config_.endpoints[current_]; }

std::string EtcdClient::where(std::string_view op) const {
  return "etcd at " + printable(endpoint()) + ": " + std::string(op) + ": ";
}

Error EtcdClient::malformed(std::string_view op, const MalformedReply& e) const {
  return Error(where(op) + "malformed reply (" + e.what() + ")");
}

HttpClient& EtcdClient::http() {
  if (!http_) {
    std::string url = endpoint();
    while (url.ends_with("/")) url.pop_back();
    http_ = std::make_unique<HttpClient>(Endpoint{url, "", config_.tls});
  }
  return *http_;
}

void EtcdClient::next_endpoint(const std::string& why) {
  if (config_.endpoints.size() == 1) return;
  current_ = (current_ + 1) % config_.endpoints.size();
  http_.reset();
  token_.clear();
  verbose("{}; trying etcd at {}", why, endpoint());
}

std::vector<std::string> EtcdClient::auth_headers(milliseconds timeout, bool renew_token) {
  if (config_.user.empty()) return {};
  if (token_.empty() || renew_token) {
    json body = {{"name", config_.user}, {"password", config_.password}};
    HttpResponse r;
    try {
      r = http().request("POST", "/v3/auth/authenticate", body.dump(), timeout);
    } catch (const ReplyTooLarge& e) {
      throw Error(where("authenticate") + e.what());
    }
    if (r.status >= 500)
      throw ServerUnavailable(where("authenticate") + r.status_text(), r.retry_after());
    if (r.status != 200) {
      EtcdStatus s = decode_status(r.body);
      throw Error("etcd at " + printable(endpoint()) + " refused user '" + printable(config_.user) +
                  "': " + (s.message.empty() ? r.status_text() : s.message));
    }
    try {
      token_ = decode_auth_token(r.body);
    } catch (const MalformedReply& e) {
      throw malformed("authenticate", e);
    }
  }
  return {"Authorization: " + token_};
}

HttpResponse EtcdClient::send(const std::string& path, const std::string& body,
                              milliseconds timeout, const Wake* wake) {
  auto headers = auth_headers(timeout);
  if (!wake) return http().request("POST", path, body, timeout, headers);
  auto r = http().request_until("POST", path, body, timeout, headers, wake->fds, wake->keep_going);
  if (!r) throw Cancelled("stopped");
  return std::move(*r);
}

std::string EtcdClient::call_raw(std::string_view op, const std::string& path, const json& body,
                                 milliseconds timeout, const Wake* wake, Deadline start_by) {
  auto end = Clock::now() + timeout;
  auto left = [&] { return std::chrono::duration_cast<milliseconds>(end - Clock::now()); };
  auto may_start = [&] { return left().count() > 0 && !start_by.passed(); };
  std::string request = body.dump();
  std::exception_ptr last;  // the last endpoint's failure, thrown when none answered
  for (;;) {
    std::optional<std::chrono::seconds> retry_after;
    for (std::size_t attempt = 0; attempt < config_.endpoints.size() && may_start(); ++attempt) {
      try {
        HttpResponse r = send(path, request, left(), wake);
        // Simple tokens expire when unused for a while: log in again, once.
        if (!config_.user.empty() && r.status != 200 &&
            decode_status(r.body).message.find("invalid auth token") != std::string::npos) {
          auth_headers(left(), true);
          r = send(path, request, left(), wake);
        }
        if (r.status == 200) return std::move(r.body);
        EtcdStatus status = decode_status(r.body);
        std::string what = where(op) + r.status_text() +
                           (status.message.empty() ? "" : " (" + status.message + ")");
        // 5xx or 14 Unavailable: this member has no leader or is stopping; another may do.
        if (r.status >= 500 || status.code == 14) {
          retry_after = r.retry_after();
          last = std::make_exception_ptr(ServerUnavailable(what, retry_after));
          next_endpoint(what);
          continue;
        }
        throw EtcdError(what, status.code);
      } catch (const ServerUnavailable& e) {  // from a login
        last = std::current_exception();
        retry_after = e.retry_after;
        next_endpoint(e.what());
      } catch (const NetworkError& e) {
        std::string what = where(op) + "cannot reach it (" + e.what() + ")";
        last = std::make_exception_ptr(NetworkError(what));
        next_endpoint(what);
      } catch (const ReplyTooLarge& e) {
        throw Error(where(op) + e.what());
      }
    }
    // Every endpoint failed. A server that said when to come back gets another round, if that
    // is before our time is up.
    if (!retry_after || std::min(left(), start_by.left(std::chrono::hours(24))) <= *retry_after)
      break;
    verbose("{}asked to retry in {}s", where(op), retry_after->count());
    if (!pause_unless_woken(*retry_after, wake)) throw Cancelled("stopped");
  }
  if (!last) throw NetworkError(where(op) + "no time left to ask");
  std::rethrow_exception(last);
}

EtcdError EtcdClient::watch_refused(const WatchMessage& m) const {
  return EtcdError(where("watch") + "etcd ended it: " +
                       (m.cancel_reason.empty() ? "no reason given" : m.cancel_reason),
                   0);
}

void EtcdClient::watch(const json& create_request,
                       const std::function<bool(const WatchMessage&)>& on_message,
                       const Wake& wake) {
  LineSplitter lines;
  std::string start;  // the first bytes, for the message when the status is not 200
  // Kept until the stream ends, so that the catches below see only the HTTP client's errors.
  std::exception_ptr failure;
  auto on_data = [&](std::string_view data) {
    if (start.size() < 256) start.append(data.substr(0, 256 - start.size()));
    try {
      for (const std::string& line : lines.feed(data)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        WatchMessage message = decode_watch_message(line);
        if (message.error) {
          std::string what = where("watch") + message.error->message;
          if (message.error->code == 14) throw ServerUnavailable(what, std::nullopt);
          throw EtcdError(what, message.error->code);
        }
        if (!on_message(message)) return false;
      }
      return true;
    } catch (...) {
      failure = std::current_exception();
      return false;
    }
  };
  json body = {{"create_request", create_request}};
  long status = 0;
  try {
    // Without a leader a member would keep the stream open and silent; with this header it
    // cancels it instead, as clientv3.WithRequireLeader asks.
    auto headers = auth_headers(std::chrono::seconds(5));
    headers.push_back("Grpc-Metadata-Hasleader: true");
    status = http().stream("POST", "/v3/watch", body.dump(), on_data, wake.fds, wake.keep_going,
                           headers);
  } catch (const ServerUnavailable&) {
    throw;  // from a login
  } catch (const NetworkError& e) {
    std::string what = where("watch") + "cannot reach it (" + e.what() + ")";
    next_endpoint(what);
    throw NetworkError(what);
  }
  // A failed request's body is an error, not watch messages: its status says more.
  if (status != 200 && status != 0) {
    HttpResponse r;
    r.status = status;
    EtcdStatus s = decode_status(start);
    std::string what =
        where("watch") + r.status_text() + (s.message.empty() ? "" : " (" + s.message + ")");
    if (status >= 500) throw ServerUnavailable(what, std::nullopt);
    throw EtcdError(what, s.code);
  }
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const MalformedReply& e) {
      throw malformed("watch", e);
    }
  }
}

}  // namespace lk
