#include "backend/local/local_hold.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "backend/local/local_record.hpp"
#include "backend/local/ofd_lock.hpp"
#include "backend/local/state_file.hpp"
#include "util/untrusted_file.hpp"

namespace lk {
namespace {

// Fencing tokens come from one counter per state directory, in a file no cleanup removes, so a
// prefix's tokens keep rising however often its own files come and go. If the state directory
// itself is wiped (a reboot empties /run), the counter restarts from the wall clock in
// microseconds, which is past anything handed out before.
// Its lock is held for a read and a write; one that is not let go belongs to a stopped process,
// and the wait for it ends with -timeout or a stopping signal like every other.
std::uint64_t next_fencing_token(int state_fd, Deadline deadline, const Interrupt& interrupt) {
  // '@' is always percent-encoded in a prefix's directory name, so no prefix can take this name.
  UniqueFd fd = open_untrusted_file(state_fd, "@fence", O_RDWR | O_CREAT);
  if (!fd) throw state_file_error("the fencing counter @fence");
  LockTarget target{fd.get(), LockKind::exclusive};
  if (!lock_any({&target, 1}, deadline, interrupt))
    throw AcquireTimeout(
        "timed out waiting for the state directory's fencing counter (@fence), "
        "which another lock holds and does not let go (a stopped process?)");
  char buf[32] = {};
  std::uint64_t last = 0;
  if (pread(fd.get(), buf, sizeof buf - 1, 0) > 0) last = std::strtoull(buf, nullptr, 10);
  // Only a hand (or another program) puts it there; wrapping around would hand out a token lower
  // than earlier ones, which is what a fencing token must never be.
  if (last == std::numeric_limits<std::uint64_t>::max())
    throw Error(
        "the state directory's fencing counter (@fence) is at the end of its range, so no "
        "token can be higher than the ones handed out; it was written by something else "
        "than lock: remove it once nothing checks tokens from this directory");
  auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  std::uint64_t token = std::max<std::uint64_t>(last + 1, static_cast<std::uint64_t>(now));
  int n = std::snprintf(buf, sizeof buf, "%20" PRIu64 "\n", token);  // fixed width: no truncate
  if (pwrite(fd.get(), buf, n, 0) != n) throw sys_error("cannot write the fencing counter");
  return token;  // closing fd unlocks it
}

// How often a holder looks its slot file up again by path. The kernel sends no event when a
// directory above the state directory is renamed or something is mounted over it, and an inotify
// instance per holder would stop at 128 holders per user (fs.inotify.max_user_instances), so the
// look is on a timer: one wakeup and one stat call each period, and no kernel quota. The wakeup
// is what costs, so the period is as long as a holder may go unaware: ten thousand holders of a
// small machine looking every second would keep its cores busy (README, the local backend).
constexpr std::chrono::seconds kPathCheckEvery{5};

// Every holder's timer fires on the same multiples of the period on the system-wide monotonic
// clock, so that the kernel wakes all the holders of a machine in one timer interrupt rather than
// in thousands spread over the period.
UniqueFd new_path_check_timer() {
  UniqueFd fd(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const time_t every = kPathCheckEvery.count();
  itimerspec when{{every, 0}, {(now.tv_sec / every + 1) * every, 0}};
  if (!fd || timerfd_settime(fd.get(), TFD_TIMER_ABSTIME, &when, nullptr) < 0)
    throw sys_error("cannot start the timer that checks the lock file");
  return fd;
}

// Our slot file (`ours`, as fstat saw it) was removed or replaced, a directory above it renamed,
// or something mounted over it: a newcomer would create a fresh file at the path and take it
// while our child still runs.
std::optional<std::string> path_lost(const struct stat& ours, const std::string& key) {
  if (leads_to(key, ours)) return std::nullopt;
  return "the lock file " + key + " was removed, replaced or moved";
}

class LocalHold : public Hold {
 public:
  LocalHold(PrefixDir dir, int slot, UniqueFd slot_fd, std::optional<Ticket> place,
            const struct stat& file, HolderRecord record, UniqueFd timer)
      : dir_(std::move(dir)),
        slot_(slot),
        slot_fd_(std::move(slot_fd)),
        place_(std::move(place)),
        file_(file),
        record_(std::move(record)),
        key_(dir_.path(PrefixDir::slot_file(slot))),
        timer_(std::move(timer)) {}
  ~LocalHold() override {
    try {
      release();
    } catch (...) {
      // Unwinding already: the descriptor is closed, only tidiness is lost.
    }
  }

  int loss_fd() const override { return timer_.get(); }

  std::optional<std::string> check_loss() override {
    std::uint64_t expirations;
    (void)!read(timer_.get(), &expirations, sizeof expirations);
    return path_lost(file_, key_);
  }

  EnvVars child_env() const override {
    return {{"LOCK_PREFIX", record_.prefix},
            {"LOCK_FENCING_TOKEN", std::to_string(record_.token)},
            {"LOCK_KEY", key_}};
  }

  void hold_until(const std::string& until) override {
    record_.until = until;
    write_record(slot_fd_.get(), key_, record_);
  }

  std::vector<int> child_fds() const override { return {slot_fd_.get()}; }

  // Closes our descriptor rather than unlocking: an unlock would free the slot for every process
  // sharing the open file, including any of the child tree that might still run.
  void release() override {
    if (!slot_fd_) return;
    slot_fd_.reset();  // the record stays behind, but an unlocked slot's record means nothing
    place_.reset();    // after the slot: whoever it wakes finds the slot free
    // The last one out removes the prefix's files. While someone waits there is nothing to
    // remove, and taking the meta lock would only delay the waiter that is taking over.
    if (!dir_.someone_waits()) dir_.tidy();
  }

 private:
  PrefixDir dir_;
  int slot_;
  UniqueFd slot_fd_;
  std::optional<Ticket> place_;
  struct stat file_;
  HolderRecord record_;
  std::string key_;
  UniqueFd timer_;
};

}  // namespace

std::unique_ptr<Hold> hold_slot(PrefixDir& dir, int slot, UniqueFd fd, std::optional<Ticket> place,
                                HolderRecord record, Deadline deadline,
                                const Interrupt& interrupt) {
  UniqueFd timer = new_path_check_timer();  // before the token: failing here spends none
  record.token = next_fencing_token(dir.state_fd(), deadline, interrupt);
  std::string key = dir.path(PrefixDir::slot_file(slot));
  write_record(fd.get(), key, record);
  // Gone already (rm -rf of the state directory while we queued): the child must not start.
  struct stat file;
  if (fstat(fd.get(), &file) < 0) throw sys_error("cannot look at " + key);
  if (auto lost = path_lost(file, key)) throw Error(*lost);
  dir.unlock_meta();
  return std::make_unique<LocalHold>(std::move(dir), slot, std::move(fd), std::move(place), file,
                                     std::move(record), std::move(timer));
}

}  // namespace lk
