#pragma once
// A state directory may be shared (-state-dir), and then anyone who can write to it can put
// anything in a prefix's directory: a FIFO, on which an open for reading blocks until someone
// writes; a socket or a device, no file of ours; a symbolic link; a sparse file of 64 GiB, which
// a buffer sized from it would not survive. Every file lock opens or reads there goes through
// here, so that none of them can hang, crash or mislead it.
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace lk {

// Records and tickets are a few hundred bytes; a file larger than this is no record of ours.
constexpr std::size_t kMaxStateFile = 64 << 10;

// Opens `name` in `dir_fd` with `flags` (plus O_NOFOLLOW, O_NONBLOCK, O_NOCTTY, O_CLOEXEC), and
// keeps it only if it is a regular file. Otherwise an invalid descriptor, with errno ENOENT
// when there is none, ENOTSUP when it is something other than a regular file (a symbolic link
// included), or what open said.
UniqueFd open_state_file(int dir_fd, const char* name, int flags, mode_t mode = 0600);

// The whole of a file opened so, or nullopt when it is larger than kMaxStateFile or unreadable.
std::optional<std::string> read_state_file(int fd);

// Removes `name` from `dir_fd` if it is a regular file (a directory, with AT_REMOVEDIR in `flags`)
// that belongs to the user lock runs as, and says whether it did. Whatever another user put
// there stays, whatever its name: in a shared state directory their files are theirs to remove.
bool remove_if_ours(int dir_fd, const char* name, int flags = 0);

// Whether `name` in `dir_fd` is still the file open as `fd`: not removed, nor replaced since.
bool still_names(int dir_fd, const char* name, int fd);

// Why open_state_file failed for `path`, for a message: "<path> is not a regular file ..." or
// "cannot open <path>: <strerror>".
Error state_file_error(const std::string& path);

}  // namespace lk
