#pragma once
// A file in a directory that others can write to (a shared state directory, node_exporter's
// textfile directory) may be anything they chose to put under its name: a FIFO, on which an open
// for reading blocks until someone writes; a socket or a device, no file at all; a symbolic link
// into a file lock may read and they may not; a sparse file of 64 GiB, which a buffer sized from
// it would not survive. What lock opens or reads in such a place goes through here, so that none
// of it can hang, crash or mislead lock.
#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "util/unique_fd.hpp"

namespace lk {

// Opens `name` in `dir_fd` (AT_FDCWD: a path) with `flags` (plus O_NOFOLLOW, O_NONBLOCK,
// O_NOCTTY, O_CLOEXEC), and keeps it only if it is a regular file. Otherwise an invalid
// descriptor, with errno ENOENT when there is none, ENOTSUP when it is something other than a
// regular file (a symbolic link included), or what open said.
UniqueFd open_untrusted_file(int dir_fd, const char* name, int flags, mode_t mode = 0600);

// The whole of a file opened so, or nullopt when it is larger than `max_size` (errno EFBIG) or
// unreadable.
std::optional<std::string> read_untrusted_file(int fd, std::size_t max_size);

}  // namespace lk
