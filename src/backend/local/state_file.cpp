#include "backend/local/state_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace lk {

UniqueFd open_state_file(int dir_fd, const char* name, int flags, mode_t mode) {
  // O_NONBLOCK: an open of a FIFO for reading returns at once rather than waiting for a writer;
  // on a regular file it changes nothing.
  UniqueFd fd(openat(dir_fd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, mode));
  if (!fd) {
    // A symbolic link, which O_NOFOLLOW refused; a socket, which no open() takes.
    if (errno == ELOOP || errno == ENXIO) errno = ENOTSUP;
    return fd;
  }
  struct stat st;
  if (fstat(fd.get(), &st) < 0) return UniqueFd();
  if (!S_ISREG(st.st_mode)) {
    errno = ENOTSUP;
    return UniqueFd();
  }
  return fd;
}

std::optional<std::string> read_state_file(int fd) {
  std::string text;
  char buf[4096];
  // Up to one byte more than allowed, which tells a file too large from one just that size.
  while (text.size() <= kMaxStateFile) {
    ssize_t n = pread(fd, buf, sizeof buf, static_cast<off_t>(text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return std::nullopt;
}

bool remove_if_ours(int dir_fd, const char* name, int flags) {
  struct stat st;
  if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_uid != geteuid()) return false;
  bool directory = flags & AT_REMOVEDIR;
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) return false;
  return unlinkat(dir_fd, name, flags) == 0;
}

bool still_names(int dir_fd, const char* name, int fd) {
  struct stat there, ours;
  return fstatat(dir_fd, name, &there, AT_SYMLINK_NOFOLLOW) == 0 && fstat(fd, &ours) == 0 &&
         there.st_dev == ours.st_dev && there.st_ino == ours.st_ino;
}

Error state_file_error(const std::string& path) {
  if (errno == ENOTSUP)
    return Error(path + " is not a regular file (someone put a link, FIFO, socket or device "
                        "there); remove it");
  return sys_error("cannot open " + path);
}

}  // namespace lk
