#include "backend/postgres/pg_hold.hpp"

#include <fmt/format.h>

#include "backend/errors.hpp"
#include "util/log.hpp"

namespace lk {

PgHold::PgHold(std::unique_ptr<PgLease> lease, PgKey key, std::optional<int> slot, int limit,
               HolderRecord record)
    : lease_(std::move(lease)), key_(key), slot_(slot), limit_(limit), record_(std::move(record)) {}

PgHold::~PgHold() { release(); }

EnvVars PgHold::child_env() const {
  std::string key = slot_ ? std::to_string(slot_key(key_, limit_, *slot_))
                          : fmt::format("{},{}", key_.k1, key_.k2);
  return {{"LOCK_PREFIX", record_.prefix},
          {"LOCK_FENCING_TOKEN", std::to_string(record_.token)},
          {"LOCK_KEY", key},
          {"LOCK_SESSION", std::to_string(lease_->backend_pid())}};
}

// Our next statement shows it in pg_stat_activity: one now, so that -status says it at once.
void PgHold::hold_until(const std::string& until) {
  record_.until = until;
  PgConnection& connection = lease_->connection();
  connection.set_comment(record_comment(record_, limit_));
  auto sent = Clock::now();
  auto rows = connection.run("SELECT pg_backend_pid()", {}, std::chrono::seconds(2), nullptr);
  lease_->answered(sent, pid_in(rows, connection.where()));
}

// The lock goes with a word to the prefix's listeners (a semaphore's first in line, -status
// -watch), then the session ends. A server that does not answer within the release budget ends
// the session by itself, the lock with it, within the TTL; closing our end meanwhile lets a
// server that is only slow see it sooner.
void PgHold::release() {
  if (released_) return;
  released_ = true;
  lease_->keeper().stop();
  std::vector<std::string> params = {channel_of(key_)};
  std::string unlock = "pg_advisory_unlock($2::bigint)";
  if (slot_) {
    params.push_back(std::to_string(slot_key(key_, limit_, *slot_)));
  } else {
    unlock = "pg_advisory_unlock($2::int4, $3::int4)";
    params.push_back(std::to_string(key_.k1));
    params.push_back(std::to_string(key_.k2));
  }
  try {
    lease_->connection().run("SELECT " + unlock + ", pg_notify($1, '')", params, kReleaseBudget,
                             nullptr);
  } catch (const Error& e) {
    verbose("letting the lock go failed ({}); closing the session, which lets it go", e.what());
  }
  lease_->end();
}

}  // namespace lk
