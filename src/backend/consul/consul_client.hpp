#pragma once
// Consul's HTTP API, as far as locks and semaphores need it: sessions, KV with acquire, release
// and check-and-set, and blocking queries. One client per thread: it owns one connection.
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/consul/consul_reply.hpp"
#include "net/http_client.hpp"
#include "util/deadline.hpp"

namespace lk {

struct ConsulConfig {
  std::string address;  // host:port, http://..., https://... or unix:///path
  TlsOptions tls;
  bool ssl = false;   // CONSUL_HTTP_SSL: https for a bare host:port
  std::string token;  // already read from -token-file when one was given
  std::string datacenter;
  bool stale = false;
};

// The agent answered 5xx: as worth retrying as no answer at all.
struct ConsulUnavailable : ServerUnavailable {
  using ServerUnavailable::ServerUnavailable;
};

// A read, with the index to wait on for the next change.
struct KvRead {
  std::vector<KvPair> pairs;
  std::uint64_t index = 0;
};

// How long a blocking query may wait at most before it returns unchanged.
constexpr std::chrono::seconds kBlockingWait{15};

// Every failure names the agent and the operation: "Consul agent at 127.0.0.1:8500: create
// session: 503 Service Unavailable (No cluster leader)". No answer is a NetworkError ("cannot
// reach it"), a 5xx a ConsulUnavailable with the server's Retry-After, a reply that does not fit
// a MalformedReply ("malformed reply (...)"). Session IDs are checked and percent-escaped wherever
// they go into a URL.
class ConsulClient {
 public:
  explicit ConsulClient(const ConsulConfig& config);
  ~ConsulClient();

  // Bounds every request from now on: none may outlast `until`, nor take longer than
  // `per_request`. Cleanup after the child uses it to keep the exit quick when the agent hangs.
  void limit(Deadline until, std::chrono::milliseconds per_request);
  // While acquiring: a 5xx whose Retry-After ends before `until` is waited out and the request
  // sent again. `wake` cuts the pause short (Cancelled); it must outlive its use here.
  void wait_out_retry_after(Deadline until, const Wake* wake);
  void no_retry_after() { retry_until_.reset(); }

  // A read of `key` (or everything under it with `recurse`). With `wait_index`, it blocks until
  // the index passes it or kBlockingWait ends. `consistent` asks the leader itself.
  // `wake` lets a blocking query be cut short (Cancelled).
  KvRead get(const std::string& key, bool recurse, std::uint64_t wait_index = 0,
             bool consistent = false, const Wake* wake = nullptr);
  bool acquire(const std::string& key, const std::string& value, std::uint64_t flags,
               const std::string& session);
  bool release(const std::string& key, std::uint64_t flags, const std::string& session);
  bool put_cas(const std::string& key, const std::string& value, std::uint64_t flags,
               std::uint64_t cas);
  bool delete_cas(const std::string& key, std::uint64_t cas);
  void delete_key(const std::string& key);

  std::string create_session(const nlohmann::json& body);
  // LeaseGone if gone; Cancelled when `stop` cuts the wait short.
  void renew_session(const std::string& id, std::chrono::milliseconds timeout, const Wake& stop);
  void destroy_session(const std::string& id);

  const std::string& address() const { return address_; }

 private:
  HttpResponse send(const std::string& method, const std::string& path, const std::string& query,
                    const std::string& body, std::chrono::milliseconds timeout,
                    const std::string& op, const Wake* wake = nullptr);
  HttpResponse send_once(const std::string& method, const std::string& target,
                         const std::string& body, std::chrono::milliseconds timeout,
                         const std::string& op, const Wake* wake);
  // "Consul agent at ADDRESS: OP: "
  std::string where(const std::string& op) const;
  // Decodes with `decode`, turning a reply that does not fit into a MalformedReply naming `op`.
  template <class Decode>
  auto decoded(const std::string& op, Decode decode) const -> decltype(decode());

  std::string address_;
  std::string token_, datacenter_;
  bool stale_;
  std::unique_ptr<HttpClient> http_;
  Deadline until_ = Deadline::never();
  std::optional<std::chrono::milliseconds> per_request_;
  std::optional<Deadline> retry_until_;
  const Wake* retry_wake_ = nullptr;
};

}  // namespace lk
