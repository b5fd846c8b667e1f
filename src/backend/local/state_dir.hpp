#pragma once
#include <sys/stat.h>

#include <string>
#include <string_view>

#include "util/unique_fd.hpp"

namespace lk {

// /run/lock/lock for root, /run/lock/lock-<uid> for others (/tmp/lock-<uid> where /run/lock is
// not open to them).
std::string default_state_dir();

// Opens the state directory, creating it (and missing parents) private to the user. A shared
// location such as /tmp could hold a directory planted by someone else, so the default one must
// also be ours and closed to others. Without `create`, a missing one gives an empty descriptor.
UniqueFd open_state_dir(const std::string& path, bool must_be_private, bool create);

// While one lives, what the local backend creates is the user's alone (directories 0700, files
// 0600) whatever the caller's umask says: 0277 would make the lock files read-only and the state
// directory unusable for every later run. The caller's umask is back before the child starts.
class PrivateUmask {
 public:
  PrivateUmask() : saved_(umask(077)) {}
  ~PrivateUmask() { umask(saved_); }
  PrivateUmask(const PrivateUmask&) = delete;
  PrivateUmask& operator=(const PrivateUmask&) = delete;

 private:
  mode_t saved_;
};

// The directory name a prefix maps to inside the state directory: one flat name, so no prefix
// can reach outside it, readable for the common characters and percent-encoded otherwise.
std::string encode_prefix(std::string_view prefix);

}  // namespace lk
