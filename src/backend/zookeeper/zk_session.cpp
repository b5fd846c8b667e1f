#include "backend/zookeeper/zk_session.hpp"

#include <algorithm>

#include <poll.h>

#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {

// Filled on the client's completion thread; the waiter may have given up by then, so the
// completion holds a reference of its own.
struct ZkSession::Reply {
  std::mutex mutex;
  bool done = false;
  int rc = ZOK;
  std::string value;  // a created node's path, or a node's data
  Stat stat{};
  bool has_stat = false;
  std::vector<std::string> names;
  EventFd ready;

  void finish(int code, const Stat* s) {
    rc = code;
    if (s) {
      stat = *s;
      has_stat = true;
    }
    done = true;
    ready.notify();
  }
};

namespace {

using Reply = ZkSession::Reply;

// The completion's reference to a Reply, handed to the client as its `data`.
std::shared_ptr<Reply>* hand_over(const std::shared_ptr<Reply>& reply) {
  return new std::shared_ptr<Reply>(reply);
}
std::shared_ptr<Reply> take_back(const void* data) {
  std::unique_ptr<std::shared_ptr<Reply>> own(
      static_cast<std::shared_ptr<Reply>*>(const_cast<void*>(data)));
  return *own;
}

void on_string_stat(int rc, const char* value, const Stat* stat, const void* data) {
  auto reply = take_back(data);
  std::lock_guard lock(reply->mutex);
  if (rc == ZOK && value) reply->value = value;
  reply->finish(rc, rc == ZOK ? stat : nullptr);
}
void on_stat(int rc, const Stat* stat, const void* data) {
  auto reply = take_back(data);
  std::lock_guard lock(reply->mutex);
  reply->finish(rc, rc == ZOK ? stat : nullptr);
}
void on_data(int rc, const char* value, int len, const Stat* stat, const void* data) {
  auto reply = take_back(data);
  std::lock_guard lock(reply->mutex);
  if (rc == ZOK && value && len > 0) reply->value.assign(value, static_cast<std::size_t>(len));
  reply->finish(rc, rc == ZOK ? stat : nullptr);
}
void on_strings(int rc, const String_vector* strings, const Stat* stat, const void* data) {
  auto reply = take_back(data);
  std::lock_guard lock(reply->mutex);
  if (rc == ZOK && strings)
    for (int i = 0; i < strings->count; ++i) reply->names.emplace_back(strings->data[i]);
  reply->finish(rc, rc == ZOK ? stat : nullptr);
}
void on_void(int rc, const void* data) {
  auto reply = take_back(data);
  std::lock_guard lock(reply->mutex);
  reply->finish(rc, nullptr);
}

// No answer at all, as opposed to ZooKeeper saying no.
bool unanswered(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZCLOSING || rc == ZSESSIONMOVED;
}

std::string state_name(int state) {
  if (state == ZOO_EXPIRED_SESSION_STATE) return "expired";
  if (state == ZOO_AUTH_FAILED_STATE) return "refused (authentication failed)";
  if (state == ZOO_CONNECTED_STATE) return "connected";
  return "connecting";
}

}  // namespace

ZkSession::ZkSession(const std::string& connect, std::chrono::milliseconds requested_timeout,
                     Deadline connect_by, const Wake* wake)
    : connect_(connect) {
  // The client's own log goes to stderr; lock speaks for itself (-verbose shows its errors).
  zoo_set_debug_level(verbose_enabled() ? ZOO_LOG_LEVEL_ERROR : static_cast<ZooLogLevel>(0));
  started_ = Clock::now();
  errno = 0;
  handle_ = zookeeper_init(connect.c_str(), &ZkSession::on_event,
                           static_cast<int>(requested_timeout.count()), nullptr, this, 0);
  if (!handle_)
    throw Error(
        "cannot use the ZooKeeper endpoints '" + printable(connect) + "': " +
        (errno == EINVAL || errno == 0
             ? std::string("not host:port[,host:port...][/chroot], or a host that does not resolve")
             : std::strerror(errno)));
  // The client resolves the host names again each time it polls its socket (a getaddrinfo and a
  // netlink query per request); a lock run lives for one session, so only a lost connection
  // needs a fresh resolution.
  zoo_set_servers_resolution_delay(handle_, -1);
  // From here on the destructor's zookeeper_close must run, whatever the constructor throws.
  struct CloseOnThrow {
    ZkSession* s;
    ~CloseOnThrow() {
      if (s) zookeeper_close(s->handle_);
    }
  } guard{this};
  wait_for_session(connect_by, wake);
  guard.s = nullptr;
  verbose("ZooKeeper at {} gave us session {:x} with a timeout of {}ms ({}ms asked for)",
          printable(connect_), id_, negotiated_.count(), requested_timeout.count());
}

// Once the wait is over (connect_by passed, or `wake` said stop), a request for a session that a
// server already has is still answered before we go: the session it may have made is then closed
// at once (by the constructor's guard), rather than left on the server until it expires.
void ZkSession::wait_for_session(Deadline connect_by, const Wake* wake) {
  enum class Ending { none, unreachable, cancelled } ending = Ending::none;
  Deadline answer_by = Deadline::never();
  auto stop_waiting = [&](Ending why) {
    ending = why;
    answer_by = Deadline::after(kReleaseBudget);
  };
  auto end = [&] {
    if (ending == Ending::cancelled) throw Cancelled("cancelled");
    throw ZkUnreachable(where() + "no server gave us a session (is ZooKeeper running there?)");
  };
  while (true) {
    {
      std::lock_guard lock(mutex_);
      if (state_ == ZOO_CONNECTED_STATE) break;
      if (state_ == ZOO_EXPIRED_SESSION_STATE || state_ == ZOO_AUTH_FAILED_STATE)
        throw ZkError(where() + "the new session was " + state_name(state_), ZSESSIONEXPIRED);
    }
    // Passed, not merely less than a millisecond left: the caller tells -timeout by passed().
    if (ending == Ending::none && connect_by.passed()) stop_waiting(Ending::unreachable);
    if (ending != Ending::none &&
        (zoo_state(handle_) != ZOO_ASSOCIATING_STATE || answer_by.passed()))
      end();
    std::vector<pollfd> fds{{events_.fd(), POLLIN, 0}};
    if (wake && ending == Ending::none)
      for (int fd : wake->fds) fds.push_back({fd, POLLIN, 0});
    // The client leaves that state, for another try, without an event: looked at every 10 ms.
    auto left = ending == Ending::none ? connect_by.left(std::chrono::hours(24))
                                       : std::min(answer_by.left(std::chrono::hours(24)),
                                                  std::chrono::milliseconds(10));
    poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(1, left.count())));
    drain_events();
    for (std::size_t i = 1; i < fds.size(); ++i)
      if ((fds[i].revents & POLLIN) && !wake->keep_going()) stop_waiting(Ending::cancelled);
  }
  const clientid_t* client = zoo_client_id(handle_);
  id_ = client ? client->client_id : 0;
  if (ending != Ending::none) {
    verbose("ZooKeeper at {} gave us session {:x} after we had stopped waiting: closing it",
            printable(connect_), id_);
    end();
  }
}

ZkSession::~ZkSession() {
  // Tells the server to end the session, which deletes our ephemeral nodes at once.
  zookeeper_close(handle_);
}

void ZkSession::on_event(zhandle_t* zh, int type, int state, const char* path, void* context) {
  auto* self = static_cast<ZkSession*>(context);
  Listener listener;
  {
    std::lock_guard lock(self->mutex_);
    if (type == ZOO_SESSION_EVENT) {
      self->state_ = state;
      if (state == ZOO_CONNECTED_STATE)
        self->negotiated_ = std::chrono::milliseconds(zoo_recv_timeout(zh));
    }
    listener = self->listener_;
  }
  if (listener) listener(type, state, path ? path : "");
  self->events_.notify();
}

void ZkSession::drain_events() const { events_.drain(); }

bool ZkSession::wait_event(const Wake& wake, int timeout_ms) const {
  std::vector<pollfd> fds{{events_.fd(), POLLIN, 0}};
  for (int fd : wake.fds) fds.push_back({fd, POLLIN, 0});
  poll(fds.data(), fds.size(), timeout_ms);
  return fds[0].revents != 0;
}

void ZkSession::set_listener(Listener listener) {
  std::lock_guard lock(mutex_);
  listener_ = std::move(listener);
}

ZkSession* abandoned;  // not static: a store the compiler may not drop

void abandon(std::unique_ptr<ZkSession> session) { abandoned = session.release(); }

std::string ZkSession::where() const { return "ZooKeeper at " + printable(connect_) + ": "; }

template <class Send>
std::shared_ptr<Reply> ZkSession::call(const char* op, const std::string& path,
                                       std::chrono::milliseconds timeout, const Wake* wake,
                                       Send send) {
  auto reply = std::make_shared<Reply>();
  auto* keep = hand_over(reply);
  int rc = send(keep);
  std::string what = std::string(op) + " " + printable(path);
  if (rc != ZOK) {
    delete keep;  // not sent: the completion will never run
    if (rc == ZINVALIDSTATE)
      throw ZkError(where() + "our session " + state_name(ZOO_EXPIRED_SESSION_STATE),
                    ZSESSIONEXPIRED);
    if (rc == ZBADARGUMENTS)
      throw ZkError(where() + "refused to " + what + ": not a valid node path", rc);
    throw ZkUnreachable(where() + "cannot " + what + ": " + zerror(rc));
  }
  Deadline until = Deadline::after(timeout);
  while (true) {
    {
      std::lock_guard lock(reply->mutex);
      if (reply->done) break;
    }
    std::vector<pollfd> fds{{reply->ready.fd(), POLLIN, 0}};
    if (wake)
      for (int fd : wake->fds) fds.push_back({fd, POLLIN, 0});
    if (until.passed())
      throw ZkUnreachable(where() + "no answer to " + what + " within " +
                          std::to_string(timeout.count()) + "ms");
    auto left = until.left(timeout);
    poll(fds.data(), fds.size(), static_cast<int>(std::max<long>(1, left.count())));
    bool woken =
        std::any_of(fds.begin() + 1, fds.end(), [](const pollfd& p) { return p.revents & POLLIN; });
    if (wake && woken && !wake->keep_going()) throw Cancelled("cancelled");
  }
  if (unanswered(reply->rc)) throw ZkUnreachable(where() + what + ": " + zerror(reply->rc));
  if (reply->rc == ZSESSIONEXPIRED || reply->rc == ZINVALIDSTATE)
    throw ZkError(where() + "our session expired", ZSESSIONEXPIRED);
  if (reply->rc == ZNOAUTH) throw ZkError(where() + "not allowed to " + what, reply->rc);
  if (reply->rc != ZOK && reply->rc != ZNONODE)
    throw ZkError(where() + "cannot " + what + ": " + zerror(reply->rc), reply->rc);
  return reply;
}

std::string ZkSession::create(const std::string& path, const std::string& data, int flags,
                              std::chrono::milliseconds timeout, Stat* stat, const Wake* wake) {
  auto reply = call("create", path, timeout, wake, [&](void* keep) {
    return zoo_acreate2(handle_, path.c_str(), data.data(), static_cast<int>(data.size()),
                        &ZOO_OPEN_ACL_UNSAFE, flags, on_string_stat, keep);
  });
  if (reply->rc == ZNONODE)
    throw ZkError(where() + "cannot create " + printable(path) + ": " + zerror(reply->rc),
                  reply->rc);
  if (stat) *stat = reply->stat;
  return reply->value;
}

void ZkSession::create_parents(const std::string& path, const std::string& data,
                               std::chrono::milliseconds timeout, const Wake* wake,
                               const std::string& existing, std::vector<std::string>& sent) {
  bool below = !existing.empty() && path.starts_with(existing + "/");
  for (std::size_t slash = path.find('/', below ? existing.size() + 1 : 1);
       slash != std::string::npos; slash = path.find('/', slash + 1)) {
    std::string parent = path.substr(0, slash);
    sent.push_back(parent);
    try {
      create(parent, data, ZOO_CONTAINER, timeout, nullptr, wake);
    } catch (const ZkError& e) {
      sent.pop_back();  // an answer, and not a node made
      // Right under the root, only the chroot can be missing, and no client makes that.
      std::size_t chroot = connect_.find('/');
      if (e.code == ZNONODE && parent.rfind('/') == 0 && chroot != std::string::npos)
        throw Error(where() + "cannot create " + printable(parent) + ": the chroot " +
                    printable(connect_.substr(chroot)) +
                    " does not exist (create it, or leave it out of -endpoints)");
      if (e.code != ZNODEEXISTS) throw;
    }
  }
}

std::optional<Stat> ZkSession::exists(const std::string& path, bool watch,
                                      std::chrono::milliseconds timeout, const Wake* wake) {
  auto reply = call("look up", path, timeout, wake, [&](void* keep) {
    return zoo_aexists(handle_, path.c_str(), watch, on_stat, keep);
  });
  if (reply->rc == ZNONODE) return std::nullopt;
  return reply->stat;
}

std::optional<ZkNode> ZkSession::get(const std::string& path, bool watch,
                                     std::chrono::milliseconds timeout, const Wake* wake) {
  auto reply = call("read", path, timeout, wake, [&](void* keep) {
    return zoo_aget(handle_, path.c_str(), watch, on_data, keep);
  });
  if (reply->rc == ZNONODE) return std::nullopt;
  return ZkNode{reply->value, reply->stat};
}

std::optional<std::vector<std::string>> ZkSession::children(const std::string& path, bool watch,
                                                            std::chrono::milliseconds timeout,
                                                            const Wake* wake) {
  auto reply = call("list", path, timeout, wake, [&](void* keep) {
    return zoo_aget_children2(handle_, path.c_str(), watch, on_strings, keep);
  });
  if (reply->rc == ZNONODE) return std::nullopt;
  return std::move(reply->names);
}

void ZkSession::set(const std::string& path, const std::string& data,
                    std::chrono::milliseconds timeout) {
  auto reply = call("write", path, timeout, nullptr, [&](void* keep) {
    return zoo_aset(handle_, path.c_str(), data.data(), static_cast<int>(data.size()), -1, on_stat,
                    keep);
  });
  if (reply->rc == ZNONODE)
    throw ZkError(where() + "write " + printable(path) + ": no such node", ZNONODE);
}

bool ZkSession::remove(const std::string& path, std::chrono::milliseconds timeout) {
  auto reply = call("delete", path, timeout, nullptr, [&](void* keep) {
    return zoo_adelete(handle_, path.c_str(), -1, on_void, keep);
  });
  return reply->rc != ZNONODE;
}

}  // namespace lk
