#pragma once
// Open-file-description locks (fcntl F_OFD_*). They belong to the open file, not to a process:
// inherited across fork, released by the kernel when the last descriptor closes, so a holder that
// dies, however it dies, never leaves a lock behind.
#include <fcntl.h>

#include <cstddef>
#include <optional>
#include <span>

#include "backend/backend.hpp"

namespace lk {

enum class LockKind : short { shared = F_RDLCK, exclusive = F_WRLCK };

bool try_lock(int fd, LockKind kind);  // false when another open file holds a conflicting lock
void unlock(int fd);
bool is_locked_elsewhere(int fd);  // does another open file hold a lock on this file?

struct LockTarget {
  int fd;
  LockKind kind;
};

// Takes the lock of whichever target frees first and returns its index; every other target is left
// unlocked. Returns nullopt when the deadline passes first; throws Interrupted when told to stop.
// The kernel queues the waits, so nothing polls.
std::optional<std::size_t> lock_any(std::span<const LockTarget> targets, Deadline deadline,
                                    const Interrupt& interrupt);

}  // namespace lk
