#pragma once
// A PostgreSQL session kept as a lease. An advisory lock lives as long as the session that took
// it, and a session lives as long as its connection: a holder that is stopped, paused or cut off
// would keep the lock for good. So the server is told to end our session once it has been idle
// for the TTL (idle_session_timeout, on this session alone; PostgreSQL 14 or later), and every
// statement we send restarts that clock once it is answered. The server cannot end the session
// before TTL has passed since it answered our last statement, which was after we sent it:
//     lease-safe deadline = send time of the last answered statement + TTL - margin
// (lease_budget.hpp), every statement of the recipe's counting as a renewal
// (LeaseKeeper::confirmed), and the keeper renewing (SELECT pg_backend_pid()) when none came.
//
// While a statement is in flight (a wait for the lock) the session is active, and idle_session_
// timeout cannot end it: a renewal due then is none (PgConnection::renew_unless_active), and the
// turn's first statement after the lock was granted (the fencing token) is a real one, so that a
// holder's deadline rests on answers alone.
//
// The server's end of the session (pg_terminate_backend, a restart, the idle timeout, a failover)
// closes our connection: from our turn on, a thread watches the socket, and its closing ends the
// hold at once. A session whose backend changes under us (a pooler in transaction mode, which
// hands each statement to any server session) cannot hold a session's lock: each renewal checks
// the backend's pid, and the hold is lost when it changes. TCP keepalives notice a server that
// is gone without a word.
#include <memory>
#include <string>
#include <thread>

#include "backend/lease/lease_keeper.hpp"
#include "backend/postgres/pg_connection.hpp"
#include "util/event_fd.hpp"

namespace lk {

class PgLease {
 public:
  // Connects (within `connect_by`), sets the session up (its idle timeout, no statement or lock
  // timeout of the server's), and starts renewing. Throws Error when the server cannot keep a
  // lease: older than 14, or a standby (whose locks are its own, not the primary's).
  PgLease(const std::string& conninfo, const LeaseTiming& timing, Deadline connect_by,
          const Wake* wake);
  ~PgLease();
  PgLease(const PgLease&) = delete;
  PgLease& operator=(const PgLease&) = delete;

  PgConnection& connection() { return *connection_; }
  LeaseKeeper& keeper() { return *keeper_; }
  // The server's process of our session (pg_backend_pid()), which pg_stat_activity names.
  int backend_pid() const { return backend_pid_; }
  // A statement of ours that was answered and checked: as good as a renewal. Throws LeaseGone
  // when `pid` (the backend that answered it; 0 for a statement that only our session may
  // answer, and that answered no row) is not our session's.
  void answered(Clock::time_point sent_at, int pid);

  // From our turn on: the session's end, seen on the socket, loses the hold at once.
  void watch_for_end();
  // Stops renewing and watching, and closes the session, which lets its locks go.
  void end();

 private:
  void watch();
  void check_pid(int pid) const;

  std::unique_ptr<PgConnection> connection_;
  int backend_pid_ = 0;
  std::unique_ptr<LeaseKeeper> keeper_;
  EventFd stop_watch_;
  std::thread watch_;
};

// A standby's advisory locks are its own: the status readers refuse one as a run does.
Error standby_refused(const std::string& where);
void refuse_standby(PgConnection& connection, std::chrono::milliseconds timeout, const Wake* wake);

// The pid column of a statement's only row, or PgUnreachable for an answer that is no such row.
int pid_in(const std::vector<PgRow>& rows, const std::string& where);

}  // namespace lk
