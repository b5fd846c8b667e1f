#include "backend/postgres/pg_lease.hpp"

#include <poll.h>

#include "backend/postgres/pg_layout.hpp"
#include "util/log.hpp"

namespace lk {
namespace {

// idle_session_timeout is the lease; a server-wide statement or lock timeout would end a wait for
// the lock, and a server that checks for a closed client only when it writes would keep a
// waiter that gave up (and closed) in line until its turn. The fencing token's commit must be on
// disk before it is given out (pg_recipe.cpp), whatever the server's own synchronous_commit.
constexpr const char* kSetUp =
    "SELECT pg_is_in_recovery(), pg_backend_pid(), set_config('idle_session_timeout', $1, false), "
    "set_config('statement_timeout', '0', false), set_config('lock_timeout', '0', false), "
    "set_config('idle_in_transaction_session_timeout', '0', false), "
    "set_config('client_connection_check_interval', '1000', false), "
    "set_config('synchronous_commit', 'on', false)";

// How long a statement of the set-up may take; the renewals' own bound comes from the budget.
constexpr std::chrono::seconds kSetUpTimeout{5};

int version_major(int server_version) { return server_version / 10000; }

}  // namespace

Error standby_refused(const std::string& where) {
  return Error(where +
               " is a standby (in recovery): its advisory locks are its own, not the "
               "primary's; connect to the primary");
}

void refuse_standby(PgConnection& connection, std::chrono::milliseconds timeout, const Wake* wake) {
  auto rows = connection.run("SELECT pg_is_in_recovery()", {}, timeout, wake);
  if (rows.size() == 1 && !rows[0].empty() && rows[0][0] == "t")
    throw standby_refused(connection.where());
}

int pid_in(const std::vector<PgRow>& rows, const std::string& where) {
  auto pid = rows.size() == 1 && !rows[0].empty() ? cell_number<int>(rows[0][0]) : std::nullopt;
  if (!pid || *pid <= 0) throw PgUnreachable(where + ": an answer that names no server process");
  return *pid;
}

PgLease::PgLease(const std::string& conninfo, const LeaseTiming& timing, Deadline connect_by,
                 const Wake* wake) {
  PgConnection::Defaults defaults;
  defaults.tcp_user_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(timing.stop_after());
  connection_ = std::make_unique<PgConnection>(conninfo, defaults, connect_by, wake);
  const std::string& where = connection_->where();
  int version = connection_->server_version();
  if (version < 140000)
    throw Error(where + ": PostgreSQL " + std::to_string(version_major(version)) +
                " cannot end an idle session by itself (idle_session_timeout came with 14): a "
                "stopped holder would keep the lock for good; lock needs PostgreSQL 14 or later");
  auto ttl_ms = std::chrono::duration_cast<std::chrono::milliseconds>(timing.ttl).count();
  auto sent = Clock::now();
  auto rows = connection_->run(kSetUp, {std::to_string(ttl_ms)}, kSetUpTimeout, wake);
  if (rows.size() != 1 || rows[0].size() < 2) throw PgUnreachable(where + ": a malformed answer");
  if (rows[0][0] == "t")
    throw Error(where +
                " is a standby (in recovery): its advisory locks are its own, not the "
                "primary's; connect to the primary");
  backend_pid_ = pid_in({{rows[0][1]}}, where);
  verbose("{}: session of server process {}, ended by the server after {} ms idle", where,
          backend_pid_, ttl_ms);
  keeper_ = std::make_unique<LeaseKeeper>(
      timing, sent,
      [this](std::chrono::milliseconds timeout, const Wake& stop) {
        try {
          if (auto answer =
                  connection_->renew_unless_active("SELECT pg_backend_pid()", timeout, stop))
            check_pid(pid_in(*answer, connection_->where()));
        } catch (const PgUnreachable& e) {
          // A closed connection is a session the server ends, and our locks with it.
          if (connection_->socket() < 0) throw LeaseGone(e.what());
          throw;
        }
      },
      /*await_answers=*/true);
}

PgLease::~PgLease() { end(); }

void PgLease::answered(Clock::time_point sent_at, int pid) {
  check_pid(pid);
  keeper_->confirmed(sent_at);
}

void PgLease::check_pid(int pid) const {
  if (pid != backend_pid_)
    throw LeaseGone(
        connection_->where() + ": a statement went to " +
        (pid ? "server process " + std::to_string(pid) : std::string("another session")) +
        ", not to " + std::to_string(backend_pid_) +
        ", ours: the connection goes through a pooler that hands statements to any "
        "session (transaction or statement mode), which cannot hold a session's lock");
}

void PgLease::watch_for_end() {
  if (!watch_.joinable()) watch_ = std::thread([this] { watch(); });
}

// The server's closing of our connection is readable on its socket; anything else it sends
// unasked (a notice) is read and let go.
void PgLease::watch() {
  for (;;) {
    pollfd fds[] = {{connection_->socket(), POLLIN, 0}, {stop_watch_.fd(), POLLIN, 0}};
    if (fds[0].fd < 0) return;
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (!fds[0].revents) continue;
    try {
      connection_->take_unasked();
    } catch (const PgUnreachable& e) {
      keeper_->lose(e.what());
      return;
    }
  }
}

void PgLease::end() {
  stop_watch_.notify();
  if (watch_.joinable()) watch_.join();
  if (keeper_) keeper_->stop();
  connection_.reset();
}

}  // namespace lk
