#include "backend/postgres/pg_connection.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>

#include "backend/errors.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

std::string seconds_text(std::chrono::seconds s) { return std::to_string(s.count()); }

// libpq's message, first line: its later lines (DETAIL, HINT) may quote the statement.
std::string first_line(const char* message) {
  std::string text = message ? message : "";
  text = text.substr(0, text.find('\n'));
  return printable(text.starts_with("FATAL:  ")   ? text.substr(8)
                   : text.starts_with("ERROR:  ") ? text.substr(8)
                                                  : text);
}

// libpq's words on a connection string it cannot read quote the part it stumbled on, which may
// be a password: each quotation longer than a character (a "=" is kept) is left out.
std::string unquoted(const std::string& text) {
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t open = text.find('"', at);
    if (open == std::string::npos) return out + text.substr(at);
    std::size_t close = text.find('"', open + 1);
    if (close == std::string::npos) return out + text.substr(at, open - at) + "\"...";
    out += text.substr(at, open - at) +
           (close - open > 2 ? "\"...\"" : text.substr(open, close - open + 1));
    at = close + 1;
  }
  return out;
}

// A server that answered no (authentication, no such database or role) will say so again; one
// starting, stopping or full may not. libpq gives no SQLSTATE for a failed connection, only its
// words, which are English here: lock sets no locale.
bool refused_for_good(const std::string& why) {
  if (why.find("FATAL") == std::string::npos) return false;
  for (const char* passing :
       {"the database system is", "too many clients", "remaining connection slots"})
    if (why.find(passing) != std::string::npos) return false;
  return true;
}

}  // namespace

PgConnection::PgConnection(const std::string& conninfo, const Defaults& defaults,
                           Deadline connect_by, const Wake* wake) {
  // Ours first: with expand_dbname, the settings of the user's string come after them and win.
  std::vector<std::string> keys = {"keepalives", "keepalives_idle", "keepalives_interval",
                                   "keepalives_count", "fallback_application_name"};
  std::vector<std::string> values = {"1", seconds_text(defaults.keepalives_idle),
                                     seconds_text(defaults.keepalives_interval),
                                     std::to_string(defaults.keepalives_count), "lock"};
  if (defaults.tcp_user_timeout.count() > 0) {
    keys.push_back("tcp_user_timeout");
    values.push_back(std::to_string(defaults.tcp_user_timeout.count()));
  }
  if (!conninfo.empty()) {
    keys.push_back("dbname");
    values.push_back(conninfo);
  }
  std::vector<const char*> k, v;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    k.push_back(keys[i].c_str());
    v.push_back(values[i].c_str());
  }
  k.push_back(nullptr);
  v.push_back(nullptr);
  conn_ = PQconnectStartParams(k.data(), v.data(), /*expand_dbname=*/1);
  if (!conn_) throw Error("PostgreSQL: out of memory");
  PQsetNoticeReceiver(conn_, &PgConnection::on_notice, this);
  try {
    connect(connect_by, wake);
  } catch (...) {
    PQfinish(conn_);
    conn_ = nullptr;
    throw;
  }
}

PgConnection::~PgConnection() {
  if (conn_) PQfinish(conn_);
}

// PQconnectPoll's own dance: wait for what it asks for, until it says done or failed.
void PgConnection::connect(Deadline connect_by, const Wake* wake) {
  auto named = [this] {
    const char* host = PQhost(conn_);
    const char* port = PQport(conn_);
    where_ = "PostgreSQL at " + printable(host && *host ? host : "its default socket") +
             (port && *port ? ":" + printable(port) : "");
  };
  if (PQstatus(conn_) == CONNECTION_BAD)
    throw PgRefused("PostgreSQL: " + unquoted(first_line(PQerrorMessage(conn_))), "");
  for (PostgresPollingStatusType state = PGRES_POLLING_WRITING;;) {
    named();
    if (state == PGRES_POLLING_OK) break;
    if (state == PGRES_POLLING_FAILED) {
      std::string why = first_line(PQerrorMessage(conn_));
      if (refused_for_good(why)) throw PgRefused(where_ + ": " + why, "");
      throw PgUnreachable(where_ + ": cannot connect: " + why);
    }
    short events = state == PGRES_POLLING_READING ? POLLIN : POLLOUT;
    if (!wait(events, connect_by, wake)) throw PgUnreachable(where_ + ": no answer in time");
    state = PQconnectPoll(conn_);
  }
  if (PQsetnonblocking(conn_, 1) != 0)
    throw PgUnreachable(where_ + ": " + first_line(PQerrorMessage(conn_)));
}

int PgConnection::socket() const { return conn_ ? PQsocket(conn_) : -1; }

int PgConnection::server_version() const { return conn_ ? PQserverVersion(conn_) : 0; }

void PgConnection::set_comment(std::string comment) {
  std::lock_guard lock(use_);
  comment_ = std::move(comment);
}

std::vector<PgRow> PgConnection::run(const std::string& sql, const std::vector<std::string>& params,
                                     std::chrono::milliseconds timeout, const Wake* wake) {
  std::lock_guard lock(use_);
  return run_locked(sql, params, timeout, wake);
}

std::optional<std::vector<PgRow>> PgConnection::renew_unless_active(
    const std::string& sql, std::chrono::milliseconds timeout, const Wake& wake) {
  // The recipe may hold the connection for as long as its turn takes: ask again and again, so
  // that a statement that starts meanwhile is seen.
  auto by = Clock::now() + timeout;
  while (!use_.try_lock_for(std::chrono::milliseconds(10))) {
    if (in_flight_) return std::nullopt;
    if (Clock::now() >= by)
      throw PgUnreachable(where_ + ": busy for " + std::to_string(timeout.count()) + " ms");
  }
  std::lock_guard lock(use_, std::adopt_lock);
  return run_locked(sql, {}, timeout, &wake);
}

std::vector<PgRow> PgConnection::run_locked(const std::string& sql,
                                            const std::vector<std::string>& params,
                                            std::chrono::milliseconds timeout, const Wake* wake) {
  if (!conn_) throw PgUnreachable(where_ + ": the connection was closed");
  Deadline by = timeout.count() > 0 ? Deadline::after(timeout) : Deadline::never();
  in_flight_ = true;
  struct Landed {
    std::atomic<bool>& in_flight;
    ~Landed() { in_flight = false; }
  } landed{in_flight_};
  send(comment_.empty() ? sql : comment_ + "\n" + sql, params, by, wake);
  return receive(by, wake);
}

void PgConnection::send(const std::string& sql, const std::vector<std::string>& params, Deadline by,
                        const Wake* wake) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  if (!PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                         values.data(), nullptr, nullptr, 0))
    lost(first_line(PQerrorMessage(conn_)));
  flush(by, wake);
}

void PgConnection::flush(Deadline by, const Wake* wake) {
  for (int pending; (pending = PQflush(conn_)) != 0;) {
    if (pending < 0) lost(first_line(PQerrorMessage(conn_)));
    if (!wait(POLLOUT, by, wake)) lost("no answer in time");
  }
}

void PgConnection::take_input(Deadline by, const Wake* wake) {
  if (!wait(POLLIN, by, wake)) lost("no answer in time");
  if (!PQconsumeInput(conn_)) lost(first_line(PQerrorMessage(conn_)));
}

// libpq sends a Sync of its own only in pipeline mode, entered for it alone.
void PgConnection::ping(std::chrono::milliseconds timeout, const Wake* wake) {
  std::lock_guard lock(use_);
  if (!conn_) throw PgUnreachable(where_ + ": the connection was closed");
  Deadline by = Deadline::after(timeout);
  if (!PQenterPipelineMode(conn_) || !PQpipelineSync(conn_))
    lost(first_line(PQerrorMessage(conn_)));
  flush(by, wake);
  for (bool synced = false; !synced;) {
    while (PQisBusy(conn_)) take_input(by, wake);
    if (PGresult* result = PQgetResult(conn_)) {
      synced = PQresultStatus(result) == PGRES_PIPELINE_SYNC;
      PQclear(result);
    } else if (PQstatus(conn_) == CONNECTION_BAD) {
      lost(first_line(PQerrorMessage(conn_)));
    } else {
      take_input(by, wake);  // nothing yet: wait for the server's word rather than ask again
    }
  }
  keep_notifications();
  if (!PQexitPipelineMode(conn_)) lost(first_line(PQerrorMessage(conn_)));
}

std::vector<PgRow> PgConnection::receive(Deadline by, const Wake* wake) {
  std::vector<PgRow> rows;
  std::optional<PgRefused> refused;
  for (;;) {
    while (PQisBusy(conn_)) take_input(by, wake);
    PGresult* result = PQgetResult(conn_);
    if (!result) break;
    auto status = PQresultStatus(result);
    if (status == PGRES_TUPLES_OK) {
      for (int r = 0; r < PQntuples(result); ++r) {
        PgRow row;
        for (int c = 0; c < PQnfields(result); ++c)
          row.push_back(PQgetisnull(result, r, c)
                            ? std::nullopt
                            : std::optional<std::string>(PQgetvalue(result, r, c)));
        rows.push_back(std::move(row));
      }
    } else if (status == PGRES_FATAL_ERROR && !refused) {
      const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
      refused.emplace(where_ + ": " + first_line(PQresultErrorMessage(result)), state ? state : "");
    }
    PQclear(result);
  }
  keep_notifications();
  if (PQstatus(conn_) == CONNECTION_BAD) lost(first_line(PQerrorMessage(conn_)));
  if (refused) throw *refused;
  return rows;
}

bool PgConnection::wait(short events, Deadline by, const Wake* wake) {
  for (;;) {
    std::vector<pollfd> fds = {{PQsocket(conn_), events, 0}};
    if (wake)
      for (int fd : wake->fds) fds.push_back({fd, POLLIN, 0});
    timespec ts;
    int n = ppoll(fds.data(), fds.size(), by.remaining(ts), nullptr);
    if (n < 0 && errno != EINTR) lost("poll failed");
    if (n > 0 && fds[0].revents) return true;
    bool woken =
        n > 0 && std::any_of(fds.begin() + 1, fds.end(), [](const pollfd& p) { return p.revents; });
    if (woken && !wake->keep_going()) {
      PQfinish(conn_);
      conn_ = nullptr;
      throw Cancelled("cancelled");
    }
    if (by.passed()) return false;
  }
}

void PgConnection::keep_notifications() {
  while (PGnotify* n = PQnotifies(conn_)) {
    notified_.emplace_back(n->relname);
    PQfreemem(n);
    notified_fd_.notify();
  }
}

PgConnection::Unasked PgConnection::await_unasked(Deadline by, const Wake& wake) {
  std::vector<pollfd> fds = {{socket(), POLLIN, 0}, {notified_fd_.fd(), POLLIN, 0}};
  for (int fd : wake.fds) fds.push_back({fd, POLLIN, 0});
  timespec ts;
  if (ppoll(fds.data(), fds.size(), by.remaining(ts), nullptr) <= 0) return Unasked::quiet;
  if (fds[0].revents || fds[1].revents) return Unasked::sent;
  if (!wake.keep_going()) throw Cancelled("the wait is over");
  return Unasked::woken;
}

std::vector<std::string> PgConnection::take_unasked() {
  std::lock_guard lock(use_);
  if (!conn_) throw PgUnreachable(where_ + ": the connection was closed");
  if (!PQconsumeInput(conn_) || PQstatus(conn_) == CONNECTION_BAD)
    lost("the server ended our session: " +
         (last_notice_.empty() ? first_line(PQerrorMessage(conn_)) : last_notice_));
  keep_notifications();
  notified_fd_.drain();
  return std::exchange(notified_, {});
}

void PgConnection::on_notice(void* self, const PGresult* notice) {
  auto* connection = static_cast<PgConnection*>(self);
  connection->last_notice_ = first_line(PQresultErrorMessage(notice));
  verbose("{}: the server says: {}", connection->where_, connection->last_notice_);
}

void PgConnection::lost(const std::string& what) {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
  throw PgUnreachable(where_ + ": " + what);
}

}  // namespace lk
