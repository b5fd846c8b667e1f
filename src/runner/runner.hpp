#pragma once
#include "cli/options.hpp"

namespace lk {

// The whole life of one `lock` invocation after parsing: acquire, run the child while holding,
// stop the child tree when the hold is lost or we are told to stop, release, and return the exit
// status. Throws Error for failures before the child starts.
int run(const Options& options);

}  // namespace lk
