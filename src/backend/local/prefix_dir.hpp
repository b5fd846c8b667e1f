#pragma once
// The files of one prefix, in one directory of the state directory:
//   meta        locked briefly to change the queue; holds the limit and the next ticket number
//   q.<n>       a ticket: one per waiter, locked by it while it waits, numbered in arrival order
//   h.<n>       with a limit of 1, the ticket of the holder that came through the queue, renamed
//               and kept locked until it lets go: the next in line waits on it alone
//   slot.<i>    one per slot of the limit, locked by its holder (and inherited by its child tree),
//               holding a JSON record of who holds it
#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.hpp"
#include "util/unique_fd.hpp"

namespace lk {

struct Meta {
  int limit = 0;  // 0 until the first contender sets it
  std::uint64_t next_ticket = 1;
};

// What a meta file's text says: the default for an empty one (just created), nullopt when it is
// not what format_meta writes.
std::optional<Meta> parse_meta(std::string_view text);
// Always the same length, so that an overwrite never needs a truncate.
std::string format_meta(const Meta& meta);

// What the files of a prefix directory whose names start with `kind` ("slot." or "q.") say,
// for those someone holds locked (the others are leftovers), in name order.
std::vector<std::string> locked_contents(int dir_fd, std::string_view kind);

// Whether `path` still leads to the file `ours` (as fstat saw it): not removed, replaced, moved
// away, or hidden under a mount. With `fd`, looks at that open file.
bool leads_to(const std::string& path, const struct stat& ours);
bool leads_to(const std::string& path, int fd);

class PrefixDir {
 public:
  // Opens the prefix's directory and takes its meta lock, creating both as needed.
  static PrefixDir enter(int state_fd, const std::string& state_path, const std::string& name,
                         Deadline deadline, const Interrupt& interrupt);

  int fd() const { return dir_.get(); }
  int state_fd() const { return state_fd_; }
  std::string path(const std::string& file) const;

  // False when the deadline passes first; throws Interrupted when told to stop.
  bool lock_meta(Deadline deadline, const Interrupt& interrupt);
  void unlock_meta();
  Meta read_meta() const;
  void write_meta(const Meta& meta) const;

  // Tickets' file names in arrival order, those of dead waiters included; with `held_too`, the
  // holder's h.<n> among them. Only names of the form ticket_file() makes.
  std::vector<std::string> tickets(bool held_too = false) const;
  bool someone_waits() const;  // is any ticket still locked by its waiter?
  bool moved() const;          // is the directory no longer at its path (removed, or moved away)?
  static std::string ticket_file(std::uint64_t number);
  static std::string held_file(std::uint64_t number);
  static std::uint64_t ticket_number(const std::string& file);
  static std::string slot_file(int slot);

  // With the meta lock held: when no ticket and no slot is locked, removes the prefix's files and
  // directory, those of our user's (remove_if_ours); true once the meta file is gone. A newcomer
  // that opened them before the removal finds its meta file unlinked once it gets the lock, and
  // starts over; one that comes after creates them afresh.
  bool remove_if_idle();
  // The same, on the way out: waits at most 200 ms for the meta lock (one held longer belongs to
  // a stopped process, and then the next user of the prefix cleans up). Never fails: only
  // tidiness would be lost.
  void tidy() noexcept;

 private:
  PrefixDir(int state_fd, std::string path, std::string name)
      : state_fd_(state_fd), path_(std::move(path)), name_(std::move(name)) {}
  // Whether a file named kind... ("" for any) is locked by someone; `seen` gets the names of the
  // regular files looked at (all of them when none is locked).
  bool any_locked(std::string_view kind, std::vector<std::string>* seen = nullptr) const;

  int state_fd_;
  std::string path_;  // of the prefix's directory
  std::string name_;
  UniqueFd dir_, meta_;
};

}  // namespace lk
