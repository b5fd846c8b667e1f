#include "backend/local/state_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace lk {

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
    return Error(path +
                 " is not a regular file (someone put a link, FIFO, socket or device "
                 "there); remove it");
  return sys_error("cannot open " + path);
}

}  // namespace lk
