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
  watcher_ = std::thread([this] { watch_own_key(me_.create_revision + 1); });
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

// Runs until told to stop. Only our own key's events reach us; a broken stream is reopened from
// the last revision seen, so a deletion in between is still reported. How long a broken stream
// may last is not this thread's business: the keeper's deadline bounds it.
void EtcdHold::watch_own_key(std::int64_t from_revision) {
  EtcdClient client(config_);
  LeaseKeeper& keeper = lease_->keeper();
  auto stopping = [&] {
    pollfd p{stop_watch_.get(), POLLIN, 0};
    return poll(&p, 1, 0) > 0 || keeper.reason().has_value();
  };
  while (!stopping()) {
    try {
      json request = {{"key", base64_encode(me_.key)}, {"start_revision", std::to_string(from_revision)}};
      client.watch(request, [&](const json& result) {
        from_revision = std::max(from_revision, etcd_int(result.value("header", json::object()), "revision") + 1);
        if (result.value("canceled", false)) {
          // Compacted past our revision: look at the key itself.
          json r = client.call("/v3/kv/range", {{"key", base64_encode(me_.key)}, {"keys_only", true}});
          if (!r.contains("kvs")) keeper.lose("our key " + me_.key + " is gone");
          return false;
        }
        for (const json& event : result.value("events", json::array())) {
          if (event.value("type", "PUT") == "DELETE") {
            keeper.lose("our key " + me_.key + " was deleted (lease revoked or expired, or removed by hand)");
            return false;
          }
        }
        return true;
      }, {stop_watch_.get(), keeper.loss_fd()}, [&] { return !stopping(); });
    } catch (const std::exception& e) {
      verbose("watching {} failed ({}); watching again in 1s", me_.key, e.what());
      pollfd p{stop_watch_.get(), POLLIN, 0};
      poll(&p, 1, 1000);
    }
  }
}

}  // namespace lk
