#include "backend/postgres/pg_backend.hpp"

#include "backend/lease/follow_prefix.hpp"
#include "backend/lease/leased_acquire.hpp"
#include "backend/postgres/pg_layout.hpp"
#include "backend/postgres/pg_options.hpp"
#include "backend/postgres/pg_recipe.hpp"

namespace lk {
namespace {

constexpr std::chrono::seconds kReadTimeout{5};
// How stale a quiet watch's picture may grow of waiters that came and sessions that died without
// a word: one statement per such spell.
constexpr std::chrono::seconds kQuietRead{5};

// The lease's, with the word on retries that do not fit said when a run starts.
PgBackendConfig prepared(const BackendConfig& config, bool starting_a_run) {
  const auto& o = static_cast<const PgOptions&>(config);
  LeaseOptions lease = o.lease();
  if (starting_a_run) lease.timing().say_shortfall();
  return {o.conninfo, lease};
}

PrefixStatus read_locks(PgConnection& connection, const std::string& prefix,
                        std::chrono::milliseconds timeout, const Wake* wake) {
  PgKey key = pg_key(prefix);
  std::vector<PgLockRow> rows;
  for (const auto& cells : connection.run(kPrefixLocksSql, pg_key_params(key), timeout, wake))
    if (auto row = lock_row(cells)) rows.push_back(*row);
  return status_of_locks(prefix, key, rows);
}

}  // namespace

std::unique_ptr<Backend> make_pg_backend(const BackendConfig& config) {
  return std::make_unique<PgBackend>(prepared(config, !config.status_only));
}

PrefixStatus read_pg_status(const BackendConfig& config, const std::string& prefix,
                            const Wake* wake) {
  return PgBackend(prepared(config, false)).read_status(prefix, wake);
}

PrefixStatus PgBackend::read_status(const std::string& prefix, const Wake* wake) {
  PgConnection connection(config_.conninfo, {}, Deadline::after(kReadTimeout), wake);
  refuse_standby(connection, kReadTimeout, wake);
  return read_locks(connection, prefix, kReadTimeout, wake);
}

// Holders NOTIFY the prefix's channel as they take a turn or let it go. A waiter that joins the
// line says nothing (NOTIFY is sent at commit, and its statement commits only once its turn
// came), nor does a session that died. So a quiet spell costs two things: on a hold's schedule,
// to tell that the server is still there (follow_prefix.hpp), a round trip that asks nothing
// (PgConnection::ping); and every kQuietRead, a read of the prefix's locks, whose finding is
// shown.
void PgBackend::watch_status(const std::string& prefix, Deadline deadline,
                             const Interrupt& interrupt,
                             const std::function<void(const PrefixStatus&)>& show) {
  LeaseTiming timing = config_.lease.timing();
  std::unique_ptr<PgConnection> connection;
  std::optional<PrefixStatus> probed;  // the probe's read, which the next look shows
  Deadline read_again = Deadline::after(kQuietRead);
  auto read = [&](std::chrono::milliseconds timeout, const Wake& wake) {
    read_again = Deadline::after(kQuietRead);
    return read_locks(*connection, prefix, timeout, &wake);
  };
  auto probe = [&](std::chrono::milliseconds timeout, const Wake& wake) {
    if (!connection) throw PgUnreachable("PostgreSQL: no connection yet");
    if (read_again.passed()) probed = read(timeout, wake);
    else connection->ping(timeout, &wake);
  };
  auto look = [&](const Wake& wake, const Heard& heard) {
    try {
      if (!connection) {
        connection = std::make_unique<PgConnection>(config_.conninfo, PgConnection::Defaults{},
                                                    Deadline::after(timing.stop_after()), &wake);
        refuse_standby(*connection, kReadTimeout, &wake);
        connection->run("LISTEN " + channel_of(pg_key(prefix)), {}, kReadTimeout, &wake);
      }
      connection->take_unasked();
      PrefixStatus status = probed ? std::move(*probed) : read(kReadTimeout, wake);
      probed.reset();
      heard();
      show(status);
      for (;;) {
        if (connection->await_unasked(Deadline::never(), wake) == PgConnection::Unasked::sent)
          return Look::changed;
        if (probed) return Look::changed;
        // A probe that failed closed the connection: the next look makes a new one.
        if (connection->socket() < 0)
          throw PgUnreachable(connection->where() + ": connection lost");
      }
    } catch (const PgUnreachable&) {
      connection.reset();
      throw;
    }
  };
  follow_prefix(prefix, deadline, interrupt, timing, probe, look);
}

std::unique_ptr<Hold> PgBackend::acquire(const LockSpec& spec, Deadline deadline,
                                         const Interrupt& interrupt, const Queued& queued) {
  LeaseTiming timing = config_.lease.timing();
  std::unique_ptr<PgLease> lease;
  auto open_lease = [&](const Wake& wake) -> LeaseKeeper& {
    lease = std::make_unique<PgLease>(config_.conninfo, timing, deadline, &wake);
    return lease->keeper();
  };
  auto contend = [&](LeaseWait& wait) {
    return std::make_unique<PgContention>(std::move(lease), spec, config_.lease.value, timing,
                                          wait);
  };
  // The connect ends at -timeout's deadline at the latest.
  LeasedRecipe recipe{.open_lease = open_lease, .contend = contend, .deadline_ends_requests = true};
  return leased_acquire(spec, deadline, interrupt, queued, recipe);
}

}  // namespace lk
