#pragma once
// etcd v3 through its JSON gateway (measured on etcd 3.4): every call is a POST of JSON, keys and
// values are base64, 64-bit numbers come back as strings and zero values are left out.
// One client per thread: it owns one connection.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "net/http_client.hpp"

namespace lk {

struct EtcdConfig {
  std::vector<std::string> endpoints;  // URLs; the next is tried when one fails
  TlsOptions tls;
  std::string user, password;  // auth, when user is not empty
};

// etcd answered with an error (as opposed to not answering).
struct EtcdError : Error {
  EtcdError(const std::string& what, int code) : Error(what), code(code) {}
  int code;  // gRPC status code; 5 is NotFound
};

struct KeyValue {
  std::string key, value;
  std::int64_t create_revision = 0;
};

// A watch the server ended other than by compaction (permissions, no leader): its reason.
std::optional<std::string> cancel_reason(const nlohmann::json& watch_result);

// A field the gateway sends as a string (int64) or leaves out when zero.
std::int64_t etcd_int(const nlohmann::json& object, const char* field);
KeyValue etcd_kv(const nlohmann::json& kv);  // decodes key and value
std::string prefix_end(const std::string& key_prefix);  // the range_end covering key_prefix*

class EtcdClient {
 public:
  explicit EtcdClient(EtcdConfig config);
  ~EtcdClient();

  // One unary call, e.g. call("/v3/kv/range", {...}). Fails over to the next endpoint when one
  // cannot be reached; throws NetworkError when none could, EtcdError when etcd said no.
  nlohmann::json call(const std::string& path, const nlohmann::json& body,
                      std::chrono::milliseconds timeout = std::chrono::seconds(5));

  // Opens a watch and hands each of its results to `on_result` until it returns false, or
  // `keep_going` (asked when a `wake_fds` descriptor is readable, and each second) returns false.
  void watch(const nlohmann::json& create_request,
             const std::function<bool(const nlohmann::json&)>& on_result,
             const std::vector<int>& wake_fds, const std::function<bool()>& keep_going);

  const std::string& endpoint() const;

 private:
  HttpClient& http();
  std::vector<std::string> auth_headers(std::chrono::milliseconds timeout, bool renew_token = false);
  void next_endpoint(const std::string& why);

  EtcdConfig config_;
  std::size_t current_ = 0;
  std::unique_ptr<HttpClient> http_;
  std::string token_;
};

}  // namespace lk
