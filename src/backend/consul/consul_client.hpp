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

#include "net/http_client.hpp"

namespace lk {

struct ConsulConfig {
  std::string address;  // host:port, http://..., https://... or unix:///path
  TlsOptions tls;
  bool ssl = false;     // CONSUL_HTTP_SSL: https for a bare host:port
  std::string token;    // already read from -token-file when one was given
  std::string datacenter;
  bool stale = false;
};

// The agent answered 5xx: as worth retrying as no answer at all.
struct ConsulUnavailable : NetworkError {
  using NetworkError::NetworkError;
};

struct KvPair {
  std::string key, value, session;
  std::uint64_t flags = 0, lock_index = 0, modify_index = 0;
};

// A read, with the index to wait on for the next change.
struct KvRead {
  std::vector<KvPair> pairs;
  std::uint64_t index = 0;
};

// A wait that `Wake::keep_going` ended; the caller knows why.
struct WaitStopped : Error {
  using Error::Error;
};

// How long a blocking query may wait at most before it returns unchanged.
constexpr std::chrono::seconds kBlockingWait{15};

class ConsulClient {
 public:
  explicit ConsulClient(const ConsulConfig& config);
  ~ConsulClient();

  // A read of `key` (or everything under it with `recurse`). With `wait_index`, it blocks until
  // the index passes it or kBlockingWait ends. `consistent` asks the leader itself.
  // `wake` lets a blocking query be cut short (WaitStopped).
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
  void renew_session(const std::string& id, std::chrono::milliseconds timeout);  // LeaseGone if gone
  void destroy_session(const std::string& id);
  std::optional<nlohmann::json> session_info(const std::string& id);

  const std::string& address() const { return address_; }

 private:
  HttpResponse send(const std::string& method, const std::string& path, const std::string& query,
                    const std::string& body, std::chrono::milliseconds timeout,
                    const std::string& what, const Wake* wake = nullptr);

  std::string address_;
  std::string token_, datacenter_;
  bool stale_;
  std::unique_ptr<HttpClient> http_;
};

}  // namespace lk
