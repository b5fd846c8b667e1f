#include "backend/etcd/etcd_hold.hpp"

#include <poll.h>
#include <sys/eventfd.h>

#include "net/base64.hpp"
#include "util/log.hpp"

namespace lk {

using nlohmann::json;

EtcdHold::EtcdHold(const EtcdConfig& config, std::unique_ptr<EtcdLease> lease, Contender me,
                   std::string prefix)
    : config_(config),
      lease_(std::move(lease)),
      me_(std::move(me)),
      prefix_(std::move(prefix)),
      stop_watch_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!stop_watch_) throw sys_error("eventfd");
  watcher_ = std::thread([this] { watch_own_key(); });
}

EtcdHold::~EtcdHold() {
  stop_watch();
  // lease_ revokes itself if release() did not run.
}

EnvVars EtcdHold::child_env() const {
  return {{"LOCK_PREFIX", prefix_},
          {"LOCK_FENCING_TOKEN", std::to_string(me_.create_revision)},
          {"LOCK_KEY", me_.key}};
}

void EtcdHold::stop_watch() {
  std::uint64_t one = 1;
  (void)!write(stop_watch_.get(), &one, sizeof one);
  if (watcher_.joinable()) watcher_.join();
}

// Revoking the lease deletes our key with it, in the same write: one write to etcd's disk less
// than a delete and a revoke, on every run.
void EtcdHold::release() {
  stop_watch();
  lease_->revoke();
}

// Runs until told to stop. Each (re)connection first reads our key outside the stream: it must
// still be the one we created (same create revision); the watch then starts just after that
// read, so no deletion can fall between two streams.
void EtcdHold::watch_own_key() {
  EtcdClient client(config_);
  LeaseKeeper& keeper = lease_->keeper();
  auto stopping = [&] {
    pollfd p{stop_watch_.get(), POLLIN, 0};
    return poll(&p, 1, 0) > 0 || keeper.reason().has_value();
  };
  while (!stopping()) {
    try {
      json r = client.call("/v3/kv/range", {{"key", base64_encode(me_.key)}, {"keys_only", true}});
      auto kvs = r.value("kvs", json::array());
      if (kvs.empty() || etcd_kv(kvs[0]).create_revision != me_.create_revision)
        return keeper.lose("our key " + me_.key + " is gone (lease revoked or expired, or removed by hand)");
      json request = {{"key", base64_encode(me_.key)},
                      {"start_revision", std::to_string(etcd_int(r["header"], "revision") + 1)}};
      client.watch(request, [&](const json& result) {
        if (auto why = cancel_reason(result)) throw EtcdError("etcd ended our watch: " + *why, 0);
        for (const json& event : result.value("events", json::array())) {
          if (event.value("type", "PUT") == "DELETE") {
            keeper.lose("our key " + me_.key + " was deleted (lease revoked or expired, or removed by hand)");
            return false;
          }
        }
        return !result.value("canceled", false);  // compacted: read the key again
      }, {stop_watch_.get(), keeper.loss_fd()}, [&] { return !stopping(); });
    } catch (const std::exception& e) {
      verbose("watching {} failed ({}); watching again in 1s", me_.key, e.what());
      pollfd p{stop_watch_.get(), POLLIN, 0};
      poll(&p, 1, 1000);
    }
  }
}

}  // namespace lk
