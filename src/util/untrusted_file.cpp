#include "util/untrusted_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace lk {

UniqueFd open_untrusted_file(int dir_fd, const char* name, int flags, mode_t mode) {
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

std::optional<std::string> read_untrusted_file(int fd, std::size_t max_size) {
  std::string text;
  char buf[4096];
  // Up to one byte more than allowed, which tells a file too large from one just that size.
  while (text.size() <= max_size) {
    ssize_t n = pread(fd, buf, sizeof buf, static_cast<off_t>(text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
  }
  errno = EFBIG;
  return std::nullopt;
}

}  // namespace lk
