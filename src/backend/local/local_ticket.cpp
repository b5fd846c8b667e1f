#include "backend/local/local_ticket.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>

#include "backend/local/local_record.hpp"
#include "backend/local/ofd_lock.hpp"
#include "backend/local/state_file.hpp"

namespace lk {

Ticket::Ticket(const PrefixDir& dir, Meta& meta, const HolderRecord& waiter) : dir_fd_(dir.fd()) {
  // A file of ours already there under the number is a leftover of a process that died while
  // creating it; anything else there costs the number, and the next one is taken.
  for (;;) {
    number_ = meta.next_ticket++;
    dir.write_meta(meta);  // first: dying before the ticket exists leaves a gap in the numbers
    file_ = PrefixDir::ticket_file(number_);
    remove_if_ours(dir_fd_, file_.c_str());
    fd_.reset(
        openat(dir_fd_, file_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
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

void Ticket::hold() {
  std::string held = PrefixDir::held_file(number_);
  if (still_names(dir_fd_, file_.c_str(), fd_.get()) &&
      renameat2(dir_fd_, file_.c_str(), dir_fd_, held.c_str(), RENAME_NOREPLACE) == 0)
    file_ = held;
}

void Ticket::leave() {
  if (!fd_) return;
  if (still_names(dir_fd_, file_.c_str(), fd_.get())) unlinkat(dir_fd_, file_.c_str(), 0);
  fd_.reset();
}

}  // namespace lk
