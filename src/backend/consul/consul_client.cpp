#include "backend/consul/consul_client.hpp"

#include <fmt/format.h>

#include "backend/lease/lease_keeper.hpp"
#include "net/base64.hpp"

namespace lk {

using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kRequestTimeout{10000};

// Consul's own reading of CONSUL_HTTP_ADDR: a scheme, a unix socket, or host:port.
Endpoint endpoint_of(const ConsulConfig& c) {
  Endpoint e;
  e.tls = c.tls;
  if (c.address.starts_with("unix://")) {
    e.unix_socket = c.address.substr(7);
    e.base_url = "http://localhost";
  } else if (c.address.starts_with("http://") || c.address.starts_with("https://")) {
    e.base_url = c.address;
  } else {
    e.base_url = (c.ssl ? "https://" : "http://") + c.address;
  }
  while (e.base_url.ends_with("/")) e.base_url.pop_back();
  return e;
}

// Percent-encodes all but unreserved characters and those in `keep`.
std::string percent_encode(const std::string& text, std::string_view keep = "") {
  std::string out;
  for (unsigned char ch : text) {
    if (std::isalnum(ch) || std::string_view("-_.~").find(static_cast<char>(ch)) != std::string_view::npos ||
        keep.find(static_cast<char>(ch)) != std::string_view::npos)
      out += static_cast<char>(ch);
    else
      out += fmt::format("%{:02X}", ch);
  }
  return out;
}

std::string escape_key(const std::string& key) { return percent_encode(key, "/"); }

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

bool answer_is_true(const HttpResponse& r) { return trimmed(r.body) == "true"; }

}  // namespace

ConsulClient::ConsulClient(const ConsulConfig& config)
    : address_(config.address),
      token_(config.token),
      datacenter_(config.datacenter),
      stale_(config.stale),
      http_(std::make_unique<HttpClient>(endpoint_of(config))) {}

ConsulClient::~ConsulClient() = default;

HttpResponse ConsulClient::send(const std::string& method, const std::string& path,
                                const std::string& query, const std::string& body,
                                milliseconds timeout, const std::string& what,
                                const Wake* wake) {
  std::string q = query;
  if (!datacenter_.empty()) q += (q.empty() ? "" : "&") + ("dc=" + percent_encode(datacenter_));
  std::vector<std::string> headers;
  if (!token_.empty()) headers.push_back("X-Consul-Token: " + token_);  // never in the URL
  HttpResponse r;
  try {
    std::string target = path + (q.empty() ? "" : "?" + q);
    if (!wake) {
      r = http_->request(method, target, body, timeout, headers);
    } else if (auto answer = http_->request_until(method, target, body, timeout, headers,
                                                  wake->fds, wake->keep_going)) {
      r = std::move(*answer);
    } else {
      throw WaitStopped("the wait was cut short");
    }
  } catch (const NetworkError& e) {
    throw NetworkError("cannot reach the Consul agent at " + address_ + " (" + e.what() + ")");
  }
  if (r.status >= 200 && r.status < 300) return r;
  std::string message = trimmed(r.body);
  if (r.status == 403)
    throw Error("Consul denied permission to " + what + ": " + message);
  if (r.status >= 500)
    throw ConsulUnavailable("Consul agent at " + address_ + " failed to " + what + " (" +
                            std::to_string(r.status) + "): " + message);
  if (r.status == 404) return r;
  throw Error("Consul agent at " + address_ + " refused to " + what + " (" +
              std::to_string(r.status) + "): " + message);
}

KvRead ConsulClient::get(const std::string& key, bool recurse, std::uint64_t wait_index,
                         bool consistent, const Wake* wake) {
  std::string q = recurse ? "recurse" : "";
  auto add = [&](const std::string& p) { q += (q.empty() ? "" : "&") + p; };
  if (wait_index) {
    add("index=" + std::to_string(wait_index));
    add("wait=" + std::to_string(kBlockingWait.count()) + "s");
  }
  if (consistent) add("consistent");
  else if (stale_) add("stale");
  // Consul adds up to wait/16 to a blocking query's wait; the answer may take that long.
  milliseconds timeout = wait_index ? milliseconds(kBlockingWait + kBlockingWait / 16) + kRequestTimeout
                                    : kRequestTimeout;
  HttpResponse r =
      send("GET", "/v1/kv/" + escape_key(key), q, "", timeout, "read key '" + key + "'", wake);
  KvRead out;
  auto index = r.headers.find("x-consul-index");
  if (index != r.headers.end()) out.index = std::stoull(index->second);
  if (r.status == 404) return out;
  for (const json& e : json::parse(r.body)) {
    KvPair p;
    p.key = e.at("Key").get<std::string>();
    if (e.contains("Value") && !e["Value"].is_null()) {
      auto bytes = base64_decode(e["Value"].get<std::string>());
      if (!bytes) throw Error("Consul sent a value that is not base64 for key '" + p.key + "'");
      p.value = *bytes;
    }
    p.session = e.value("Session", "");
    p.flags = e.value("Flags", std::uint64_t{0});
    p.lock_index = e.value("LockIndex", std::uint64_t{0});
    p.modify_index = e.value("ModifyIndex", std::uint64_t{0});
    out.pairs.push_back(std::move(p));
  }
  return out;
}

bool ConsulClient::acquire(const std::string& key, const std::string& value, std::uint64_t flags,
                           const std::string& session) {
  return answer_is_true(send("PUT", "/v1/kv/" + escape_key(key),
                             "acquire=" + session + "&flags=" + std::to_string(flags), value,
                             kRequestTimeout, "write key '" + key + "'"));
}

bool ConsulClient::release(const std::string& key, std::uint64_t flags, const std::string& session) {
  return answer_is_true(send("PUT", "/v1/kv/" + escape_key(key),
                             "release=" + session + "&flags=" + std::to_string(flags), "",
                             kRequestTimeout, "write key '" + key + "'"));
}

bool ConsulClient::put_cas(const std::string& key, const std::string& value, std::uint64_t flags,
                           std::uint64_t cas) {
  return answer_is_true(send("PUT", "/v1/kv/" + escape_key(key),
                             "cas=" + std::to_string(cas) + "&flags=" + std::to_string(flags),
                             value, kRequestTimeout, "write key '" + key + "'"));
}

bool ConsulClient::delete_cas(const std::string& key, std::uint64_t cas) {
  return answer_is_true(send("DELETE", "/v1/kv/" + escape_key(key), "cas=" + std::to_string(cas),
                             "", kRequestTimeout, "delete key '" + key + "'"));
}

void ConsulClient::delete_key(const std::string& key) {
  send("DELETE", "/v1/kv/" + escape_key(key), "", "", kRequestTimeout, "delete key '" + key + "'");
}

std::string ConsulClient::create_session(const json& body) {
  HttpResponse r = send("PUT", "/v1/session/create", "", body.dump(), kRequestTimeout,
                        "create a session");
  return json::parse(r.body).at("ID").get<std::string>();
}

void ConsulClient::renew_session(const std::string& id, milliseconds timeout) {
  HttpResponse r = send("PUT", "/v1/session/renew/" + id, "", "", timeout, "renew session " + id);
  if (r.status == 404)
    throw LeaseGone("Consul says session " + id + " no longer exists (destroyed or expired)");
}

void ConsulClient::destroy_session(const std::string& id) {
  send("PUT", "/v1/session/destroy/" + id, "", "", kRequestTimeout, "destroy session " + id);
}

std::optional<json> ConsulClient::session_info(const std::string& id) {
  HttpResponse r = send("GET", "/v1/session/info/" + id, "", "", kRequestTimeout,
                        "read session " + id);
  json j = json::parse(r.body, nullptr, false);
  if (r.status == 404 || !j.is_array() || j.empty()) return std::nullopt;
  return j[0];
}

}  // namespace lk
