#pragma once
// etcd v3 through its JSON gateway (measured on etcd 3.4): every call is a POST of JSON, keys and
// values are base64, 64-bit numbers come back as strings and zero values are left out. Replies
// are decoded and checked by etcd_reply.hpp. One client per thread: it owns one connection.
//
// Every error names the server and the operation: "etcd at http://10.0.0.1:2379: lease grant:
// 503 Service Unavailable".
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "backend/etcd/etcd_reply.hpp"
#include "net/http_client.hpp"

namespace lk {

struct EtcdConfig {
  std::vector<std::string> endpoints;  // URLs; the next is tried when one fails
  TlsOptions tls;
  std::string user, password;  // auth, when user is not empty
};

// etcd answered, and said no (as opposed to not answering, or answering 5xx).
struct EtcdError : Error {
  EtcdError(const std::string& what, int code) : Error(what), code(code) {}
  int code;  // gRPC status code; 5 is NotFound
};

std::string prefix_end(const std::string& key_prefix);  // the range_end covering key_prefix*

class EtcdClient {
 public:
  explicit EtcdClient(EtcdConfig config);
  ~EtcdClient();

  // One unary call, e.g. call("range", "/v3/kv/range", {...}, timeout, decode_header), within
  // `timeout` all told, however many endpoints, logins and Retry-Afters it takes, none of them
  // begun after `start_by`. Fails over to the next endpoint when one cannot be reached or answers
  // 5xx. Returns what `decode` makes of the body of a 200 reply. Throws ServerUnavailable (5xx,
  // with the server's Retry-After), NetworkError (no answer), EtcdError (etcd said no), Cancelled
  // (when `wake` said stop), and Error for a reply too large or malformed.
  template <class Decode>
  auto call(std::string_view op, const std::string& path, const nlohmann::json& body,
            std::chrono::milliseconds timeout, Decode&& decode, const Wake* wake = nullptr,
            Deadline start_by = Deadline::never()) {
    std::string reply = call_raw(op, path, body, timeout, wake, start_by);
    try {
      return decode(std::string_view(reply));
    } catch (const MalformedReply& e) {
      throw malformed(op, e);
    }
  }

  // Opens a watch and hands each of its messages to `on_message` until it returns false, the
  // server ends the stream, or `wake` says stop. Throws as call() does; a stream that fails
  // with "Unavailable" (no leader) throws ServerUnavailable.
  void watch(const nlohmann::json& create_request,
             const std::function<bool(const WatchMessage&)>& on_message, const Wake& wake);

  // What a watch that etcd cancelled, for another reason than compaction, fails with.
  EtcdError watch_refused(const WatchMessage& m) const;

  const std::string& endpoint() const;
  // "etcd at http://10.0.0.1:2379: lease grant: ", the start of every message about `op`.
  std::string where(std::string_view op) const;
  Error malformed(std::string_view op, const MalformedReply& e) const;

 private:
  std::string call_raw(std::string_view op, const std::string& path, const nlohmann::json& body,
                       std::chrono::milliseconds timeout, const Wake* wake, Deadline start_by);
  HttpResponse send(const std::string& path, const std::string& body,
                    std::chrono::milliseconds timeout, const Wake* wake);
  HttpClient& http();
  std::vector<std::string> auth_headers(std::chrono::milliseconds timeout,
                                        bool renew_token = false);
  void next_endpoint(const std::string& why);

  EtcdConfig config_;
  std::size_t current_ = 0;
  std::unique_ptr<HttpClient> http_;
  std::string token_;
};

}  // namespace lk
