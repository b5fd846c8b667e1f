#pragma once
// One ZooKeeper session through the C client (its multi-threaded flavour): connected on
// construction, closed on destruction, which makes the server delete every ephemeral node of
// ours at once. Each request is sent asynchronously and waited for on our own descriptors, so
// that -timeout, a stopping signal or the loss of the hold cuts any wait short.
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/errors.hpp"
#include "net/wake.hpp"
#include "util/deadline.hpp"
#include "util/error.hpp"
#include "util/event_fd.hpp"
#include "util/unique_fd.hpp"

namespace lk {

// ZooKeeper answered with an error code; `code` is the C client's (ZNONODE, ZNODEEXISTS, ...).
struct ZkError : Error {
  ZkError(const std::string& what, int code) : Error(what), code(code) {}
  int code;
};
// No answer (connection lost, request timed out): worth asking again while the session lives.
struct ZkUnreachable : NetworkError {
  using NetworkError::NetworkError;
};

struct ZkNode {
  std::string data;
  Stat stat{};
};

class ZkSession {
 public:
  // Called on the client's own thread for every watch and session event (type and state as
  // zookeeper.h has them; path empty for session events). Must not block.
  using Listener = std::function<void(int type, int state, const std::string& path)>;

  // `connect` is ZooKeeper's connect string, host:port[,host:port...][/chroot]. Throws
  // ZkUnreachable when no server gives us a session by `connect_by`, Cancelled when `wake` says
  // stop; either way, a server that has our request for a session by then is given the release
  // budget to answer it, so that the session it made is closed rather than left to expire.
  ZkSession(const std::string& connect, std::chrono::milliseconds requested_timeout,
            Deadline connect_by, const Wake* wake = nullptr);
  ~ZkSession();
  ZkSession(const ZkSession&) = delete;
  ZkSession& operator=(const ZkSession&) = delete;

  // The session timeout the server granted, which every deadline follows.
  std::chrono::milliseconds negotiated_timeout() const { return negotiated_; }
  std::int64_t id() const { return id_; }
  // When the request that asked for the session was sent: the server cannot expire it earlier
  // than a timeout after that.
  Clock::time_point started_at() const { return started_; }
  // Readable after any watch or session event; the reader drains it and looks again.
  int events_fd() const { return events_.fd(); }
  void drain_events() const;
  // Until a watch or session event (true), one of `wake`'s descriptors readable (the caller asks
  // it whether to go on), or `timeout_ms` (-1: none).
  bool wait_event(const Wake& wake, int timeout_ms) const;
  void set_listener(Listener listener);

  // Each returns once ZooKeeper answered, or throws: ZkError for an error code (but see the
  // optional results), ZkUnreachable when no answer comes within `timeout`, Cancelled when
  // `wake` says stop. `watch` leaves a one-time watch that fires through events_fd/listener.
  std::string create(const std::string& path, const std::string& data, int flags,
                     std::chrono::milliseconds timeout, Stat* stat = nullptr,
                     const Wake* wake = nullptr);
  // Creates each missing ancestor of `path` as a CONTAINER node carrying `data` (reaped by the
  // server once it has had a child and is empty again), from the root down, or only those below
  // `existing` when that ancestor is known to be there. Appends to `sent` each one whose create
  // went out and was not refused: made by this call, or perhaps (when no answer came).
  void create_parents(const std::string& path, const std::string& data,
                      std::chrono::milliseconds timeout, const Wake* wake,
                      const std::string& existing, std::vector<std::string>& sent);
  std::optional<Stat> exists(const std::string& path, bool watch, std::chrono::milliseconds timeout,
                             const Wake* wake = nullptr);
  std::optional<ZkNode> get(const std::string& path, bool watch, std::chrono::milliseconds timeout,
                            const Wake* wake = nullptr);
  // Empty when the node does not exist.
  std::optional<std::vector<std::string>> children(const std::string& path, bool watch,
                                                   std::chrono::milliseconds timeout,
                                                   const Wake* wake = nullptr);
  // Writes the node's data, whatever its version; throws ZkError(ZNONODE) when it is gone.
  void set(const std::string& path, const std::string& data, std::chrono::milliseconds timeout);
  // False when there was nothing to delete.
  bool remove(const std::string& path, std::chrono::milliseconds timeout);

  // A message prefix that names the server: "ZooKeeper at <connect>: ".
  std::string where() const;

  struct Reply;  // what a completion hands back (zk_session.cpp)

 private:
  // Sends one request (`send` gets the completion's data) and waits for the answer: ZOK or
  // ZNONODE come back, every other answer is thrown as above.
  template <class Send>
  std::shared_ptr<Reply> call(const char* op, const std::string& path,
                              std::chrono::milliseconds timeout, const Wake* wake, Send send);
  static void on_event(zhandle_t*, int type, int state, const char* path, void* context);
  // The constructor's wait for the session, and its id once given; throws as it says.
  void wait_for_session(Deadline connect_by, const Wake* wake);

  std::string connect_;
  zhandle_t* handle_ = nullptr;
  EventFd events_;
  mutable std::mutex mutex_;
  Listener listener_;
  int state_ = 0;
  std::chrono::milliseconds negotiated_{0};
  std::int64_t id_ = 0;
  Clock::time_point started_;
};

// Leaves `session` to expire on the server instead of closing it, which would wait on that
// server: for a process about to exit after its server stopped answering (one session, at most,
// is kept reachable, so that no leak checker counts it).
void abandon(std::unique_ptr<ZkSession> session);

}  // namespace lk
