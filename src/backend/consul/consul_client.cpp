#include "backend/consul/consul_client.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "backend/lease/lease_keeper.hpp"
#include "util/log.hpp"

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
    if (std::isalnum(ch) ||
        std::string_view("-_.~").find(static_cast<char>(ch)) != std::string_view::npos ||
        keep.find(static_cast<char>(ch)) != std::string_view::npos)
      out += static_cast<char>(ch);
    else out += fmt::format("%{:02X}", ch);
  }
  return out;
}

std::string escape_key(const std::string& key) { return percent_encode(key, "/"); }

// A session ID goes into paths and queries only once it is known to be one, and escaped even so.
std::string escape_session(const std::string& id) {
  if (!is_session_id(id))
    throw Error("refusing to use \"" + printable(id, 60) + "\" as a Consul session ID");
  return percent_encode(id);
}

std::string_view trimmed(std::string_view s) {
  auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

}  // namespace

ConsulClient::ConsulClient(const ConsulConfig& config)
    : address_(config.address),
      token_(config.token),
      datacenter_(config.datacenter),
      stale_(config.stale),
      http_(std::make_unique<HttpClient>(endpoint_of(config))) {}

ConsulClient::~ConsulClient() = default;

void ConsulClient::limit(Deadline until, milliseconds per_request) {
  until_ = until;
  per_request_ = per_request;
}

void ConsulClient::wait_out_retry_after(Deadline until, const Wake* wake) {
  retry_until_ = until;
  retry_wake_ = wake;
}

std::string ConsulClient::where(const std::string& op) const {
  return "Consul agent at " + printable(address_) + ": " + op + ": ";
}

template <class Decode>
auto ConsulClient::decoded(const std::string& op, Decode decode) const -> decltype(decode()) {
  try {
    return decode();
  } catch (const MalformedReply& e) {
    throw MalformedReply(where(op) + "malformed reply (" + e.what() + ")");
  }
}

HttpResponse ConsulClient::send(const std::string& method, const std::string& path,
                                const std::string& query, const std::string& body,
                                milliseconds timeout, const std::string& op, const Wake* wake) {
  std::string q = query;
  if (!datacenter_.empty()) q += (q.empty() ? "" : "&") + ("dc=" + percent_encode(datacenter_));
  std::string target = path + (q.empty() ? "" : "?" + q);
  for (;;) {
    try {
      return send_once(method, target, body, timeout, op, wake);
    } catch (const ConsulUnavailable& e) {
      // The server said when to come back: worth it if that is before the deadline at hand.
      if (!retry_until_ || !e.retry_after) throw;
      milliseconds pause = *e.retry_after;
      if (retry_until_->left(pause + milliseconds(1)) <= pause) throw;
      verbose("{}; asked to retry in {}s", e.what(), e.retry_after->count());
      if (!pause_unless_woken(std::max(pause, milliseconds(1)), retry_wake_))
        throw Cancelled("the wait was cut short");
    }
  }
}

HttpResponse ConsulClient::send_once(const std::string& method, const std::string& target,
                                     const std::string& body, milliseconds timeout,
                                     const std::string& op, const Wake* wake) {
  if (per_request_) timeout = std::min(timeout, *per_request_);
  if (until_.passed()) throw NetworkError(where(op) + "no time was left to ask");
  timeout = until_.left(timeout);
  std::vector<std::string> headers;
  if (!token_.empty()) headers.push_back("X-Consul-Token: " + token_);  // never in the URL
  HttpResponse r;
  try {
    if (!wake) {
      r = http_->request(method, target, body, timeout, headers);
    } else if (auto answer = http_->request_until(method, target, body, timeout, headers, wake->fds,
                                                  wake->keep_going)) {
      r = std::move(*answer);
    } else {
      throw Cancelled("the wait was cut short");
    }
  } catch (const ReplyTooLarge& e) {
    throw MalformedReply(where(op) + e.what());
  } catch (const NetworkError& e) {
    throw NetworkError(where(op) + "cannot reach it (" + e.what() + ")");
  }
  if ((r.status >= 200 && r.status < 300) || r.status == 404) return r;
  std::string_view said = trimmed(r.body);
  std::string what =
      where(op) + r.status_text() + (said.empty() ? "" : " (" + printable(said) + ")");
  if (r.status >= 500) throw ConsulUnavailable(what, r.retry_after());
  throw Error(what);
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
  milliseconds timeout = wait_index
                             ? milliseconds(kBlockingWait + kBlockingWait / 16) + kRequestTimeout
                             : kRequestTimeout;
  std::string op = (recurse ? "read keys under '" : "read key '") + printable(key) + "'";
  HttpResponse r = send("GET", "/v1/kv/" + escape_key(key), q, "", timeout, op, wake);
  KvRead out;
  auto index = r.headers.find("x-consul-index");
  out.index =
      decoded(op, [&] { return decode_index(index == r.headers.end() ? "" : index->second); });
  if (r.status == 404) return out;
  out.pairs = decoded(op, [&] { return decode_kv_list(r.body, key, recurse); });
  return out;
}

bool ConsulClient::acquire(const std::string& key, const std::string& value, std::uint64_t flags,
                           const std::string& session) {
  std::string op = "acquire key '" + printable(key) + "'";
  HttpResponse r = send("PUT", "/v1/kv/" + escape_key(key),
                        "acquire=" + escape_session(session) + "&flags=" + std::to_string(flags),
                        value, kRequestTimeout, op);
  return decoded(op, [&] { return decode_bool(r.body); });
}

bool ConsulClient::release(const std::string& key, std::uint64_t flags,
                           const std::string& session) {
  std::string op = "release key '" + printable(key) + "'";
  HttpResponse r = send("PUT", "/v1/kv/" + escape_key(key),
                        "release=" + escape_session(session) + "&flags=" + std::to_string(flags),
                        "", kRequestTimeout, op);
  return decoded(op, [&] { return decode_bool(r.body); });
}

bool ConsulClient::put_cas(const std::string& key, const std::string& value, std::uint64_t flags,
                           std::uint64_t cas) {
  std::string op = "write key '" + printable(key) + "'";
  HttpResponse r = send("PUT", "/v1/kv/" + escape_key(key),
                        "cas=" + std::to_string(cas) + "&flags=" + std::to_string(flags), value,
                        kRequestTimeout, op);
  return decoded(op, [&] { return decode_bool(r.body); });
}

bool ConsulClient::delete_cas(const std::string& key, std::uint64_t cas) {
  std::string op = "delete key '" + printable(key) + "'";
  HttpResponse r = send("DELETE", "/v1/kv/" + escape_key(key), "cas=" + std::to_string(cas), "",
                        kRequestTimeout, op);
  return decoded(op, [&] { return decode_bool(r.body); });
}

void ConsulClient::delete_key(const std::string& key) {
  std::string op = "delete key '" + printable(key) + "'";
  HttpResponse r = send("DELETE", "/v1/kv/" + escape_key(key), "", "", kRequestTimeout, op);
  decoded(op, [&] { return decode_bool(r.body); });
}

std::string ConsulClient::create_session(const json& body) {
  HttpResponse r =
      send("PUT", "/v1/session/create", "", body.dump(), kRequestTimeout, "create session");
  if (r.status == 404) throw Error(where("create session") + r.status_text());
  return decoded("create session", [&] { return decode_session_create(r.body); });
}

void ConsulClient::renew_session(const std::string& id, milliseconds timeout, const Wake& stop) {
  std::string op = "renew session " + id;
  HttpResponse r =
      send("PUT", "/v1/session/renew/" + escape_session(id), "", "", timeout, op, &stop);
  bool gone = r.status == 404 || !decoded(op, [&] { return decode_session_info(r.body, id); });
  if (gone) throw LeaseGone(where(op) + "the session no longer exists (destroyed or expired)");
}

void ConsulClient::destroy_session(const std::string& id) {
  std::string op = "destroy session " + id;
  HttpResponse r =
      send("PUT", "/v1/session/destroy/" + escape_session(id), "", "", kRequestTimeout, op);
  decoded(op, [&] { return decode_bool(r.body); });
}

}  // namespace lk
