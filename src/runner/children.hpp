#pragma once
// Our own children, as the kernel knows them. /proc lists them; where it is not mounted (a bare
// chroot or container), waitid answers "not your child" for every other pid, so asking it about
// each possible pid finds them too, at about a microsecond a pid (seconds with pid_max at its
// largest): a fallback for the rare moments that need it.
#include <sys/types.h>

#include <optional>
#include <vector>

namespace lk {

std::optional<std::vector<pid_t>> listed_children();  // nullopt without /proc
std::vector<pid_t> scanned_children();
bool have_children();  // cheap, without /proc too

}  // namespace lk
