#include "backend/local/state_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "util/error.hpp"
#include "util/printable.hpp"

namespace lk {

// Never from the session's environment ($XDG_RUNTIME_DIR): a cron job and a login shell of the
// same user must find the same locks, and logind removes that directory at logout.
std::string default_state_dir() {
  if (geteuid() == 0) return "/run/lock/lock";
  if (faccessat(AT_FDCWD, "/run/lock", W_OK | X_OK, AT_EACCESS) == 0)
    return "/run/lock/lock-" + std::to_string(geteuid());
  return "/tmp/lock-" + std::to_string(geteuid());
}

namespace {

// Missing parents are made private as well (the caller holds a PrivateUmask): they were not
// there, so nobody else relies on entering them.
void make_dirs(const std::string& path) {
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    std::string parent = path.substr(0, slash);
    if (mkdir(parent.c_str(), 0700) < 0 && errno != EEXIST)
      throw sys_error("cannot create state directory " + parent);
  }
  if (mkdir(path.c_str(), 0700) < 0 && errno != EEXIST)
    throw sys_error("cannot create state directory " + path);
}

}  // namespace

UniqueFd open_state_dir(const std::string& path, bool must_be_private, bool create) {
  if (path.empty()) throw UsageError("the state directory must not be empty");
  // A path the user named may be a symlink; the default one, in a shared place, may not.
  int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (must_be_private ? O_NOFOLLOW : 0);
  UniqueFd fd(open(path.c_str(), flags));
  if (!fd && errno == ENOENT && create) {  // made once; every later run only opens it
    make_dirs(path);
    fd.reset(open(path.c_str(), flags));
  }
  if (!fd && !create && errno == ENOENT) return fd;
  if (!fd) throw sys_error("cannot open state directory " + path);
  if (must_be_private) {
    struct stat st;
    if (fstat(fd.get(), &st) < 0) throw sys_error("cannot inspect state directory " + path);
    // Ours and closed to others, but not open to us (made under an umask such as 0277 by an
    // earlier version): repaired, or every run would fail here for good.
    if (st.st_uid == geteuid() && (st.st_mode & 0777) != 0700 && (st.st_mode & 077) == 0 &&
        fchmod(fd.get(), 0700) == 0)
      st.st_mode = (st.st_mode & ~07777) | 0700;
    if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      // Another user may have made it first, to deny us our locks: nothing we could do with it
      // would be safe, so the way out is a directory of our own.
      throw Error("state directory " + path + " is not private (owner uid " +
                  std::to_string(st.st_uid) + ", mode " + mode +
                  "); remove it if it is yours, or use a directory only you can write to, with "
                  "-state-dir or LOCK_STATE_DIR (such as $HOME/.lock)");
    }
  }
  return fd;
}

std::string encode_prefix(std::string_view prefix) {
  static const char hex[] = "0123456789ABCDEF";
  std::string name;
  for (unsigned char c : prefix) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '.';
    if (plain) {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += hex[c >> 4];
      name += hex[c & 15];
    }
  }
  if (name.size() > 255)
    throw UsageError("prefix '" + printable(prefix) + "' is too long for the local backend");
  return name;
}

}  // namespace lk
