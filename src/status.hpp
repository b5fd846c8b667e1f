#pragma once
#include "cli/options.hpp"

namespace lk {

// lock -status: who holds the prefix and who waits, as text or JSON. Returns the exit status:
// 0 when the prefix is held, 3 when it is not (1, for errors, is thrown as usual).
int show_status(const Options& options);

}  // namespace lk
