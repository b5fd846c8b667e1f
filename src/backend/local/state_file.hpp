#pragma once
// A state directory may be shared (-state-dir), and then anyone who can write to it can put
// anything in a prefix's directory: every file lock opens there is opened with
// open_untrusted_file (util/untrusted_file.hpp), which neither follows a link nor waits on a FIFO.
// What is here is what the state directory adds: how large its files may be, whose files lock may
// remove, and what lock says of a file it cannot use.
#include <cstddef>
#include <optional>
#include <string>

#include "util/error.hpp"
#include "util/untrusted_file.hpp"

namespace lk {

// Records and tickets are a few hundred bytes; a file larger than this is no record of ours.
constexpr std::size_t kMaxStateFile = 64 << 10;

// The whole of a file of the state directory (opened with open_untrusted_file), or nullopt when
// it is larger than kMaxStateFile or unreadable.
inline std::optional<std::string> read_state_file(int fd) {
  return read_untrusted_file(fd, kMaxStateFile);
}

// Removes `name` from `dir_fd` if it is a regular file (a directory, with AT_REMOVEDIR in `flags`)
// that belongs to the user lock runs as, and says whether it did. Whatever another user put
// there stays, whatever its name: in a shared state directory their files are theirs to remove.
bool remove_if_ours(int dir_fd, const char* name, int flags = 0);

// Whether `name` in `dir_fd` is still the file open as `fd`: not removed, nor replaced since.
bool still_names(int dir_fd, const char* name, int fd);

// Why open_untrusted_file failed for `path` in the state directory, for a message: "<path> is
// not a regular file ..." or "cannot open <path>: <strerror>".
Error state_file_error(const std::string& path);

}  // namespace lk
