#pragma once
#include "runner/watchdog.hpp"

namespace lk {

// The watchdog's whole life, in the process Watchdog forks: it waits for the child's spawn,
// starts it, keeps its tree until the tree is gone, and exits. `socket` is its end of the pair.
[[noreturn]] void watchdog_main(int socket, const watchdog::Shared& shared,
                                const WatchdogSetup& setup);

}  // namespace lk
