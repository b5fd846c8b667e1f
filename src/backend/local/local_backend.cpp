// The local recipe, a first-come-first-served semaphore built from kernel file locks:
//
//  1. Under the meta lock, check the limit. If nobody waits and a slot is free, take it and go to
//     step 4; otherwise take the next ticket (a file we keep locked).
//  2. Wait until every ticket ahead of ours is gone. Each waiter waits only on the live ticket
//     just ahead of it, so a departure wakes one process, not the herd, and order is kept.
//  3. At the head of the queue, take whichever of the `limit` slot files frees first.
//  4. Under the meta lock, take a fencing token and record who holds the slot. With a limit of 1
//     the ticket is kept, renamed from q.<n> to h.<n>, until the slot is let go: the next in line,
//     which waits on it, wakes once, to a free slot. With more slots, holders leave the queue here
//     and the head waits on the slots themselves.
//
// Every lock is released by the kernel when its holder dies, so no crash leaves the prefix stuck.
// The slot lock is inherited by the child tree: the slot stays taken until the last process of
// the tree has gone, even if `lock` itself is killed.
#include "backend/local/local_backend.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

#include "backend/holder_record.hpp"
#include "backend/local/ofd_lock.hpp"
#include "backend/local/prefix_dir.hpp"
#include "backend/local/state_file.hpp"
#include "backend/local/state_dir.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

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
  UniqueFd fd = open_state_file(state_fd, "@fence", O_RDWR | O_CREAT);
  if (!fd) throw state_file_error("the fencing counter @fence");
  LockTarget target{fd.get(), LockKind::exclusive};
  if (!lock_any({&target, 1}, deadline, interrupt))
    throw AcquireTimeout("timed out waiting for the state directory's fencing counter (@fence), "
                         "which another lock holds and does not let go (a stopped process?)");
  char buf[32] = {};
  std::uint64_t last = 0;
  if (pread(fd.get(), buf, sizeof buf - 1, 0) > 0) last = std::strtoull(buf, nullptr, 10);
  // Only a hand (or another program) puts it there; wrapping around would hand out a token lower
  // than earlier ones, which is what a fencing token must never be.
  if (last == std::numeric_limits<std::uint64_t>::max())
    throw Error("the state directory's fencing counter (@fence) is at the end of its range, so no "
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

// Consul's wording, which users of `consul lock` already search for, with what we know added.
void check_limit(int theirs, int ours) {
  if (theirs == 0 || theirs == ours) return;
  if (theirs > 1 && ours > 1)
    throw Error("semaphore limit conflict (lock: " + std::to_string(theirs) +
                ", local: " + std::to_string(ours) + ")");
  if (ours == 1)
    throw Error("Existing key does not match lock use (the prefix is in use as a semaphore with -n " +
                std::to_string(theirs) + ")");
  throw Error("Existing key does not match semaphore use (the prefix is in use as a lock)");
}

// Overwrites the record in place, padded with blanks (which JSON ignores) to the file's size:
// truncating instead costs a journal transaction on ext4, on the path every holder takes. A file
// too large to be a record (grown by someone else while we did not hold it) is emptied first.
void write_record(int fd, const std::string& path, const HolderRecord& record) {
  std::string json = record.to_json();
  struct stat st;
  if (fstat(fd, &st) < 0) throw sys_error("cannot write " + path);
  if (st.st_size > static_cast<off_t>(kMaxStateFile)) {
    if (ftruncate(fd, 0) < 0) throw sys_error("cannot write " + path);
    st.st_size = 0;
  }
  if (static_cast<off_t>(json.size()) < st.st_size) json.resize(st.st_size, ' ');
  ssize_t n = pwrite(fd, json.data(), json.size(), 0);
  if (n != static_cast<ssize_t>(json.size()))  // a short write: the file system is full
    throw sys_error("cannot write " + path, n < 0 ? errno : ENOSPC);
}

// A record that does not parse belongs to a holder still writing it.
HolderRecord parse_record(const std::string& text) {
  try {
    return HolderRecord::from_json(text);
  } catch (const Error&) {
    return HolderRecord();  // HolderRecord::who() says so
  }
}

// "; held by pid 12 on web1 since ..." for every live slot: what a user who timed out wants.
std::string describe_holders(const PrefixDir& dir) {
  std::string out;
  for (const auto& text : locked_contents(dir.fd(), "slot.")) {
    auto r = parse_record(text);
    out += (out.empty() ? "; held by " : ", ") + r.who();
  }
  return out;
}

// A place in the queue, kept for as long as we wait (with a limit of 1, as long as we hold). Its
// name is removed or renamed only while it still names our file: in a shared state directory,
// another user may have put something of theirs in its place.
class Ticket {
 public:
  // Call with the meta lock held, so that a ticket is locked before anyone can see it. A file of
  // ours already there under the number is a leftover of a process that died while creating it;
  // anything else there costs the number, and the next one is taken.
  Ticket(const PrefixDir& dir, Meta& meta, const HolderRecord& waiter) : dir_fd_(dir.fd()) {
    for (;;) {
      number_ = meta.next_ticket++;
      dir.write_meta(meta);  // first: dying before the ticket exists leaves a gap in the numbers
      file_ = PrefixDir::ticket_file(number_);
      remove_if_ours(dir_fd_, file_.c_str());
      fd_.reset(openat(dir_fd_, file_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       0600));
      if (fd_) break;
      if (errno != EEXIST) throw sys_error("cannot create " + dir.path(file_));
    }
    try {
      if (!try_lock(fd_.get(), LockKind::exclusive)) throw Error("cannot lock " + dir.path(file_));
      write_record(fd_.get(), dir.path(file_), waiter);
    } catch (...) {
      leave();
      throw;
    }
  }
  Ticket(Ticket&&) = default;
  ~Ticket() { leave(); }

  std::uint64_t number() const { return number_; }
  // Renamed, it no longer counts as waiting (lock status, the last one out) but stays locked, and
  // whoever waits on it waits on the same open file. If the rename fails (something is in the
  // way), the ticket keeps its name and does the same job; only lock status counts it as a
  // waiter for a while.
  void hold() {
    std::string held = PrefixDir::held_file(number_);
    if (still_names(dir_fd_, file_.c_str(), fd_.get()) &&
        renameat2(dir_fd_, file_.c_str(), dir_fd_, held.c_str(), RENAME_NOREPLACE) == 0)
      file_ = held;
  }
  void leave() {
    if (!fd_) return;
    if (still_names(dir_fd_, file_.c_str(), fd_.get())) unlinkat(dir_fd_, file_.c_str(), 0);
    fd_.reset();
  }

 private:
  int dir_fd_;  // the PrefixDir's, which outlives us
  std::uint64_t number_ = 0;
  std::string file_;
  UniqueFd fd_;
};

// Step 2: returns once no live ticket is ahead of ours, false when the deadline passes first.
// With `held_too`, the holder's kept ticket counts as ahead.
bool wait_for_turn(const PrefixDir& dir, std::uint64_t mine, bool held_too, Deadline deadline,
                   const Interrupt& interrupt) {
  for (;;) {
    auto files = dir.tickets(held_too);
    auto ahead = std::find_if(files.begin(), files.end(), [&](const std::string& file) {
      return PrefixDir::ticket_number(file) >= mine;
    });
    UniqueFd just_ahead;
    while (ahead != files.begin() && !just_ahead) {
      const std::string& file = *--ahead;
      // Gone: it left while we looked, or became the holder's h.<n>, and then we are next. Not
      // a regular file: no waiter's, whoever put it there; neither waited for nor removed.
      UniqueFd fd = open_state_file(dir.fd(), file.c_str(), O_RDONLY);
      if (!fd && errno != ENOENT && errno != ENOTSUP) throw sys_error("cannot open " + dir.path(file));
      if (!fd) continue;
      if (!try_lock(fd.get(), LockKind::shared)) {
        just_ahead = std::move(fd);
      } else {
        // Tickets ahead of ours were locked before ours existed; an unlocked one was left by a
        // waiter (or holder) that died. Clear it, if it is our user's, so that nobody looks at
        // it again.
        remove_if_ours(dir.fd(), file.c_str());
      }
    }
    if (!just_ahead) return true;
    LockTarget target{just_ahead.get(), LockKind::shared};
    if (!lock_any({&target, 1}, deadline, interrupt)) return false;
  }
}

// How often a holder looks its slot file up again by path. The kernel sends no event when a
// directory above the state directory is renamed or something is mounted over it, and an inotify
// instance per holder would stop at 128 holders per user (fs.inotify.max_user_instances), so the
// look is on a timer: one wakeup and one stat call a second, and no kernel quota.
constexpr std::chrono::seconds kPathCheckEvery{1};

UniqueFd new_path_check_timer() {
  UniqueFd fd(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  itimerspec every{{kPathCheckEvery.count(), 0}, {kPathCheckEvery.count(), 0}};
  if (!fd || timerfd_settime(fd.get(), 0, &every, nullptr) < 0)
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
            const struct stat& file, std::uint64_t token, std::string prefix, UniqueFd timer)
      : dir_(std::move(dir)),
        slot_(slot),
        slot_fd_(std::move(slot_fd)),
        place_(std::move(place)),
        file_(file),
        token_(token),
        prefix_(std::move(prefix)),
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
    return {{"LOCK_PREFIX", prefix_},
            {"LOCK_FENCING_TOKEN", std::to_string(token_)},
            {"LOCK_KEY", key_}};
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
  std::uint64_t token_;
  std::string prefix_;
  std::string key_;
  UniqueFd timer_;
};

// Step 4, with the meta lock held: a new fencing token, the record of who holds, the hold. On
// failure, closing `fd` gives the slot back (LocalBackend::acquire tidies the prefix).
std::unique_ptr<Hold> hold_slot(PrefixDir& dir, int slot, UniqueFd fd, std::optional<Ticket> place,
                                HolderRecord record, Deadline deadline, const Interrupt& interrupt) {
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
                                     record.token, record.prefix, std::move(timer));
}

UniqueFd open_slot(const PrefixDir& dir, int slot) {
  std::string file = PrefixDir::slot_file(slot);
  UniqueFd fd = open_state_file(dir.fd(), file.c_str(), O_RDWR | O_CREAT);
  if (!fd) throw state_file_error(dir.path(file));
  return fd;
}

// One descriptor and one waiting thread per slot: a limit the descriptor limit cannot carry is
// refused up front rather than failing while others wait.
void check_limit_fits(int limit) {
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur != RLIM_INFINITY && static_cast<rlim_t>(limit) + 64 > files.rlim_cur)
    throw UsageError("-n " + std::to_string(limit) + " needs more open files than the limit of " +
                     std::to_string(files.rlim_cur) + " (ulimit -n)");
}

// Steps 1 to 4 in the prefix's directory, entered with its meta lock held. Null when the prefix
// carried a limit that nobody uses any more and was removed: the caller starts over.
std::unique_ptr<Hold> take_turn(PrefixDir& dir, const LockSpec& spec, Deadline deadline,
                                const Interrupt& interrupt) {
  auto waiter = HolderRecord::for_this_process(spec.prefix, spec.session_name);

  // Step 1.
  Meta meta = dir.read_meta();
  if (meta.limit != spec.limit && meta.limit != 0 && dir.remove_if_idle()) return nullptr;
  check_limit(meta.limit, spec.limit);
  bool limit_is_new = meta.limit == 0;
  meta.limit = spec.limit;
  // Nobody waits: a free slot is ours at once, without a ticket (the uncontended path).
  if (dir.tickets().empty()) {
    for (int i = 0; i < spec.limit; ++i) {
      UniqueFd fd = open_slot(dir, i);
      if (!try_lock(fd.get(), LockKind::exclusive)) continue;
      if (limit_is_new) dir.write_meta(meta);
      return hold_slot(dir, i, std::move(fd), std::nullopt, waiter, deadline, interrupt);
    }
  }
  Ticket ticket(dir, meta, waiter);
  dir.unlock_meta();
  interrupt.queued();
  auto timed_out = [&] {
    return AcquireTimeout("timed out waiting for prefix '" + printable(spec.prefix) + "'" +
                          describe_holders(dir));
  };

  // Step 2.
  if (verbose_enabled())  // reading the records costs a look at every slot: only when asked
    verbose("prefix '{}' is busy{}; waiting in line with ticket {}", printable(spec.prefix),
            describe_holders(dir), ticket.number());
  bool kept = spec.limit == 1;
  if (!wait_for_turn(dir, ticket.number(), kept, deadline, interrupt)) throw timed_out();

  // Step 3.
  std::vector<UniqueFd> slots;
  std::vector<LockTarget> targets;
  for (int i = 0; i < spec.limit; ++i) {
    slots.push_back(open_slot(dir, i));
    targets.push_back({slots.back().get(), LockKind::exclusive});
  }
  auto slot = lock_any(targets, deadline, interrupt);
  if (!slot) throw timed_out();

  // Step 4.
  if (!dir.lock_meta(deadline, interrupt)) throw timed_out();
  std::optional<Ticket> place;
  if (kept) {
    ticket.hold();
    place.emplace(std::move(ticket));
  } else {
    ticket.leave();
  }
  return hold_slot(dir, static_cast<int>(*slot), std::move(slots[*slot]), std::move(place), waiter,
                   deadline, interrupt);
}

}  // namespace

LocalBackend::LocalBackend(const std::string& state_path, bool only_look)
    : state_path_(state_path.empty() ? default_state_dir() : state_path),
      must_be_private_(state_path.empty()) {
  PrivateUmask creating;
  state_ = open_state_dir(state_path_, must_be_private_, !only_look);
}

std::unique_ptr<Hold> LocalBackend::acquire(const LockSpec& spec, Deadline deadline,
                                            const Interrupt& interrupt) {
  PrivateUmask creating;
  check_limit_fits(spec.limit);
  int start_overs = 0;  // bounded, so that a path that never leads back cannot make a busy loop
  for (;;) {
    std::optional<PrefixDir> dir;
    try {
      dir.emplace(PrefixDir::enter(state_.get(), state_path_, encode_prefix(spec.prefix), deadline,
                                   interrupt));
      if (auto hold = take_turn(*dir, spec, deadline, interrupt)) return hold;
    } catch (const Error& e) {
      // A failure because the state or the prefix's directory was taken away meanwhile (a cleaner
      // of /tmp, rm -rf of the state directory): we were queued where nobody else looks, so
      // start over where newcomers go. Any other (out of space or inodes, say) is the run's end.
      bool gave_up = dynamic_cast<const AcquireTimeout*>(&e) || dynamic_cast<const Interrupted*>(&e);
      bool moved = dir ? dir->moved() : !leads_to(state_path_, state_.get());
      bool start_over = !gave_up && ++start_overs <= 10 && moved;
      // Our ticket and slot are closed by now; what this run created goes too, unless someone
      // else uses the prefix.
      if (dir) dir->tidy();
      if (!start_over) throw;
      verbose("{}; the state directory was removed or moved meanwhile: starting over", e.what());
      state_ = open_state_dir(state_path_, must_be_private_, /*create=*/true);
    } catch (...) {
      if (dir) dir->tidy();
      throw;
    }
  }
}

PrefixStatus LocalBackend::status(const std::string& prefix, const Wake*) {
  PrefixStatus status;
  if (!state_) return status;  // no state directory: nobody has used any prefix
  std::string name = encode_prefix(prefix);
  UniqueFd dir(openat(state_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    if (errno == ENOENT) return status;  // nobody has used it, or the last one out removed it
    throw sys_error("cannot open " + state_path_ + "/" + name);
  }
  for (const auto& text : locked_contents(dir.get(), "slot."))
    status.holders.push_back(parse_record(text));
  for (const auto& text : locked_contents(dir.get(), "q.")) status.waiters.push_back(parse_record(text));
  if (status.holders.empty() && status.waiters.empty()) return status;
  UniqueFd meta = open_state_file(dir.get(), "meta", O_RDONLY);
  auto text = meta ? read_state_file(meta.get()) : std::nullopt;
  if (auto m = text ? parse_meta(*text) : std::nullopt) status.limit = m->limit;
  return status;
}

}  // namespace lk
