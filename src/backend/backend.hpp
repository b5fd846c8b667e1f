#pragma once
// The backend-neutral contract between the runner and a lock service. A backend knows nothing of
// children; the runner knows nothing of files, sessions or leases.
#include <poll.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/errors.hpp"
#include "backend/holder_record.hpp"
#include "net/wake.hpp"
#include "util/deadline.hpp"

namespace lk {

struct LockSpec {
  std::string prefix;        // already validated (see prefix.hpp)
  int limit = 1;             // 1: a lock; more: a semaphore with that many slots
  std::string session_name;  // shown to whoever asks who holds the prefix
};

// Lets a long wait be cut short: when `fd` becomes readable, `keep_going()` says whether to go on
// waiting, as a Wake's does.
struct Interrupt {
  int fd = -1;
  std::function<bool()> keep_going = [] { return true; };

  // Asks keep_going() only once `fd` is readable: asking may cost a look at the server (the
  // runner's notices and status lines), and a request's wait asks every second besides.
  bool keep_going_if_woken() const {
    pollfd p{fd, POLLIN, 0};
    return fd < 0 || poll(&p, 1, 0) <= 0 || keep_going();
  }
  // The same, for a request: `this` must outlive the Wake.
  Wake wake() const {
    return {{fd}, [this] { return keep_going_if_woken(); }};
  }
};

// Called when an acquisition has its place in line, perhaps more than once (a start-over); an
// uncontended acquisition may return without calling it.
using Queued = std::function<void()>;

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// What a backend hands the runner once acquisition is confirmed.
class Hold {
 public:
  virtual ~Hold() = default;
  // Readable when the hold may have been lost; check_loss() then says whether it was, and why.
  virtual int loss_fd() const = 0;
  virtual std::optional<std::string> check_loss() = 0;
  // For a lease: calls `publish` with the lease-safe deadline, by which the child tree must be
  // dead unless a renewal moves it, at once and after every confirmed renewal, from whichever
  // thread confirmed it. The watchdog keeps to it (runner/stop_plan.hpp), so that neither a
  // backend's thread stuck somewhere nor lock itself, stopped, can keep the child past it.
  virtual void publish_deadline(std::function<void(Clock::time_point dead_by)> /*publish*/) {}
  // Variables that tell the child what it holds (fencing token, key, prefix).
  virtual EnvVars child_env() const = 0;
  // Descriptors the child tree inherits, so the hold outlives this process only as long as the
  // tree.
  virtual std::vector<int> child_fds() const = 0;
  // -min-hold, once the child has gone: the stored record, where it is lock's own, says that the
  // hold lasts until `until` (RFC 3339), for -status and waiters. Throws Error when the record
  // could not be written; the hold itself is unchanged either way.
  virtual void hold_until(const std::string& until) = 0;
  // Gives the hold up (the child tree is gone by now) and removes what nobody uses any more.
  virtual void release() = 0;
};

// Who holds a prefix and who waits for it, as the backend's records say.
struct PrefixStatus {
  int limit = 0;               // 0 when nobody uses the prefix
  bool limit_unknown = false;  // a semaphore whose holders do not record its limit (Curator's)
  std::vector<HolderRecord> holders, waiters;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // -status -watch: calls `show` with the status at once, then again after every event that may
  // have changed it (perhaps unchanged: the caller tells), never on a timer; returns when
  // `interrupt` says stop or `deadline` passes. Throws Error when the server cannot be followed.
  virtual void watch_status(const std::string& prefix, Deadline deadline,
                            const Interrupt& interrupt,
                            const std::function<void(const PrefixStatus&)>& show) = 0;
  // Returns once the hold is confirmed, calling `queued` once it waits in line. Throws
  // AcquireTimeout when `deadline` passes first, Interrupted when `interrupt` says stop, and
  // Error for anything else.
  virtual std::unique_ptr<Hold> acquire(const LockSpec& spec, Deadline deadline,
                                        const Interrupt& interrupt, const Queued& queued) = 0;
};

}  // namespace lk
