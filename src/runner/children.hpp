#pragma once
// Our own children, as the kernel knows them. /proc lists them; where it is not mounted (a bare
// chroot or container), waitid answers "not your child" for every other pid, so asking it about
// each possible pid finds them too, at about a microsecond a pid: seconds for all 4,194,304,
// which is why the scan goes in slices.
#include <sys/types.h>

#include <optional>
#include <vector>

namespace lk {

std::optional<std::vector<pid_t>> listed_children();  // nullopt without /proc

// Asks about `count` pids from `from` on and adds our children among them to `found`. Returns
// where the next slice starts, or 0 once past the largest pid there can be.
pid_t scan_children(pid_t from, pid_t count, std::vector<pid_t>& found);
std::vector<pid_t> scanned_children();  // all slices at once
bool have_children();                   // cheap, without /proc too

}  // namespace lk
