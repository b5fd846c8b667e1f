#include "backend/etcd/etcd_client.hpp"

#include "net/base64.hpp"
#include "util/deadline.hpp"
#include "util/log.hpp"

namespace lk {

using nlohmann::json;

std::int64_t etcd_int(const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return 0;
  if (it->is_string()) return std::stoll(it->get<std::string>());
  return it->get<std::int64_t>();
}

KeyValue etcd_kv(const json& kv) {
  auto decode = [&](const char* field) {
    auto it = kv.find(field);
    if (it == kv.end()) return std::string();
    auto bytes = base64_decode(it->get<std::string>());
    if (!bytes) throw Error(std::string("etcd sent a ") + field + " that is not base64");
    return *bytes;
  };
  return {decode("key"), decode("value"), etcd_int(kv, "create_revision")};
}

std::optional<std::string> cancel_reason(const json& result) {
  if (!result.value("canceled", false) || etcd_int(result, "compact_revision") > 0) return std::nullopt;
  return result.value("cancel_reason", std::string("the server cancelled the watch"));
}

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

std::vector<std::string> EtcdClient::auth_headers(std::chrono::milliseconds timeout, bool renew_token) {
  if (config_.user.empty()) return {};
  if (token_.empty() || renew_token) {
    json body = {{"name", config_.user}, {"password", config_.password}};
    auto r = http().request("POST", "/v3/auth/authenticate", body.dump(), timeout);
    json reply = json::parse(r.body, nullptr, false);
    if (r.status != 200 || !reply.contains("token"))
      throw Error("etcd at " + endpoint() + " refused user '" + config_.user + "': " +
                  reply.value("message", r.body));
    token_ = reply["token"].get<std::string>();
  }
  return {"Authorization: " + token_};
}

json EtcdClient::call(const std::string& path, const json& body, std::chrono::milliseconds timeout) {
  // One budget for the whole call, however many endpoints and logins it takes.
  auto end = Clock::now() + timeout;
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
  };
  std::string last_failure = "no time left to try";
  for (std::size_t attempt = 0; attempt < config_.endpoints.size() && left().count() > 0; ++attempt) {
    try {
      auto r = http().request("POST", path, body.dump(), left(), auth_headers(left()));
      json reply = json::parse(r.body, nullptr, false);
      // Simple tokens expire when unused for a while: log in again, once.
      if (!config_.user.empty() && reply.is_object() &&
          reply.value("message", "").find("invalid auth token") != std::string::npos) {
        r = http().request("POST", path, body.dump(), left(), auth_headers(left(), true));
        reply = json::parse(r.body, nullptr, false);
      }
      if (r.status == 200 && reply.is_object()) return reply;
      std::string message = reply.is_object() ? reply.value("message", r.body) : r.body;
      int code = reply.is_object() ? reply.value("code", 0) : 0;
      // 14 Unavailable: this member has no leader or is stopping; another one may do.
      if (code == 14 || (r.status >= 500 && code == 0)) {
        last_failure = endpoint() + ": " + message;
        next_endpoint(last_failure);
        continue;
      }
      throw EtcdError("etcd at " + endpoint() + " said: " + message, code);
    } catch (const NetworkError& e) {
      last_failure = e.what();
      next_endpoint(last_failure);
    }
  }
  throw NetworkError("cannot reach etcd (" + last_failure + ")");
}

void EtcdClient::watch(const json& create_request,
                       const std::function<bool(const json&)>& on_result,
                       const std::vector<int>& wake_fds, const std::function<bool()>& keep_going) {
  std::string pending;
  std::exception_ptr failure;  // exceptions must not cross libcurl's C frames
  auto on_data = [&](std::string_view data) {
    pending.append(data);
    try {
      // The gateway writes one JSON object per line.
      for (std::size_t eol; (eol = pending.find('\n')) != std::string::npos;) {
        json message = json::parse(pending.substr(0, eol), nullptr, false);
        pending.erase(0, eol + 1);
        if (message.is_discarded()) continue;
        if (message.contains("error"))
          throw EtcdError("etcd watch failed: " + message["error"].value("message", message.dump()),
                          message["error"].value("grpc_code", 0));
        if (message.contains("result") && !on_result(message["result"])) return false;
      }
      return true;
    } catch (...) {
      failure = std::current_exception();
      return false;
    }
  };
  json body = {{"create_request", create_request}};
  try {
    // Without a leader a member would keep the stream open and silent; with this header it
    // cancels it instead, as clientv3.WithRequireLeader asks.
    auto headers = auth_headers(std::chrono::seconds(5));
    headers.push_back("Grpc-Metadata-Hasleader: true");
    long status = http().stream("POST", "/v3/watch", body.dump(), on_data, wake_fds, keep_going,
                                headers);
    if (failure) std::rethrow_exception(failure);
    if (status != 200 && status != 0) throw EtcdError("etcd watch failed with HTTP status " + std::to_string(status), 0);
  } catch (const NetworkError& e) {
    next_endpoint(e.what());
    throw;
  }
}

}  // namespace lk
