#pragma once
// One libpq connection, whose every wait (connecting, a statement's answer, the server's unasked
// messages) is on its socket beside our own descriptors, so that a stop signal, -timeout or the
// lease's loss cuts it short. A wait cut short closes the connection: a statement in flight
// cannot be abandoned otherwise (the server's answer would come to the next one), and a cancel
// request is a connection of its own that a dead network would hang. The server notices the
// closed socket within client_connection_check_interval (pg_lease.cpp sets it), even in a lock
// wait.
//
// The lease's keeper renews from a thread of its own while the recipe may be waiting in a
// statement: statements are one at a time (a mutex), and a renewal due while one is in flight
// needs none (see renew_unless_active).
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "net/wake.hpp"
#include "util/deadline.hpp"
#include "util/error.hpp"
#include "util/event_fd.hpp"

struct pg_conn;
struct pg_result;

namespace lk {

// No answer, or the connection lost (the session with it): worth trying again on a new one.
struct PgUnreachable : NetworkError {
  using NetworkError::NetworkError;
};
// The server answered no: authentication, privileges, a statement it refused. `sqlstate` is its
// code ("28P01"), empty when libpq gave none.
struct PgRefused : Error {
  PgRefused(const std::string& what, std::string sqlstate)
      : Error(what), sqlstate(std::move(sqlstate)) {}
  std::string sqlstate;
};

using PgRow = std::vector<std::optional<std::string>>;

class PgConnection {
 public:
  // Keepalive and timeout settings that go before the user's own, which may override them.
  struct Defaults {
    std::chrono::seconds keepalives_idle{2}, keepalives_interval{1};
    int keepalives_count = 3;
    std::chrono::milliseconds tcp_user_timeout{0};  // 0: the system's
  };

  // `conninfo`: a connection string or URI, or empty for libpq's environment alone (PGHOST,
  // PGSERVICE, ~/.pgpass, ...). Throws PgUnreachable when no server answers by `connect_by`,
  // PgRefused when one refuses us, Cancelled when `wake` says stop. Nothing the user gave in
  // `conninfo` (a password) ever reaches a message.
  PgConnection(const std::string& conninfo, const Defaults& defaults, Deadline connect_by,
               const Wake* wake);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // "PostgreSQL at host:port", for messages.
  const std::string& where() const { return where_; }
  int socket() const;
  // The server's version, as server_version_num has it (150004).
  int server_version() const;

  // Every statement begins with this comment (pg_layout.hpp: the holder record).
  void set_comment(std::string comment);

  // Runs one statement, with `params` as its $1, $2, ... (text), and returns its rows. Throws
  // PgUnreachable when no answer comes within `timeout` (zero: none needed) or the connection
  // is lost, PgRefused when the server refuses it, Cancelled when `wake` says stop; each but
  // PgRefused closes the connection.
  std::vector<PgRow> run(const std::string& sql, const std::vector<std::string>& params,
                         std::chrono::milliseconds timeout, const Wake* wake);
  // One round trip that asks the server nothing: a protocol Sync, which it answers that it is
  // ready, without parsing, planning or a snapshot. Throws as run() does.
  void ping(std::chrono::milliseconds timeout, const Wake* wake);
  // A statement in flight keeps the session active, so that the server cannot end it as idle
  // before it has answered: no renewal is needed then (nullopt). Otherwise runs `sql` as run()
  // does and returns its rows, or throws as run() does.
  std::optional<std::vector<PgRow>> renew_unless_active(const std::string& sql,
                                                        std::chrono::milliseconds timeout,
                                                        const Wake& wake);

  // Reads what the server sent unasked, without waiting: the channels of the notifications it
  // brought. Throws PgUnreachable when the connection ended (the server ended our session).
  std::vector<std::string> take_unasked();
  // Waits until the server sent something unasked (or notifications came that a statement read
  // meanwhile, from another thread: the socket then says nothing) (sent), `wake` was woken and
  // says go on (woken), or `by` passed (quiet). Throws Cancelled when `wake` says stop. Reads
  // nothing: take_unasked() does.
  enum class Unasked { sent, woken, quiet };
  Unasked await_unasked(Deadline by, const Wake& wake);

 private:
  std::vector<PgRow> run_locked(const std::string& sql, const std::vector<std::string>& params,
                                std::chrono::milliseconds timeout, const Wake* wake);
  void connect(Deadline connect_by, const Wake* wake);
  void send(const std::string& sql, const std::vector<std::string>& params, Deadline by,
            const Wake* wake);
  void flush(Deadline by, const Wake* wake);
  // Waits for the server's next bytes and reads them in.
  void take_input(Deadline by, const Wake* wake);
  std::vector<PgRow> receive(Deadline by, const Wake* wake);
  // Waits until the socket is ready for `events`, `by` passes (false) or `wake` says stop
  // (Cancelled); the connection is closed then.
  bool wait(short events, Deadline by, const Wake* wake);
  void keep_notifications();
  [[noreturn]] void lost(const std::string& what);
  static void on_notice(void* self, const pg_result* notice);

  pg_conn* conn_ = nullptr;
  std::string where_;
  // The server's last unasked word (a notice, or the FATAL that comes before it closes the
  // session), which says why better than libpq's "server closed the connection". libpq would
  // print it on stderr otherwise.
  std::string last_notice_;
  std::string comment_;
  std::timed_mutex use_;  // one statement at a time
  std::atomic<bool> in_flight_{false};
  std::vector<std::string> notified_;  // channels read by a statement, for take_unasked()
  EventFd notified_fd_;
};

}  // namespace lk
