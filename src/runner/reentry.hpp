#pragma once
// A run inside a run. A script that holds a prefix and calls another script that takes the same
// prefix would wait behind its own ancestor forever (flock(1)'s users set FLOCKER for this). So a
// lock whose environment says that an enclosing lock holds the prefix (LOCK_PREFIX, and the
// LOCK_FENCING_TOKEN its child was given) asks its backend who holds it: when the holder is one
// of our ancestors on this host, with that token, its child is run at once, in lock's place.
// The variables alone are not trusted: a daemon started by a child keeps them after the hold is
// gone, and another backend or state directory has holders of its own. A holder that stored
// -value instead of lock's record (Consul, etcd, ZooKeeper) does not say who it is, and a run
// below it waits as before.
#include <optional>
#include <string>

#include "cli/options.hpp"

namespace lk {

// The enclosing hold, told for -verbose ("pid 12 on web1 since ..., token 7"), or nullopt.
std::optional<std::string> enclosing_hold(const Options& options);

// Runs the child in our place (exec): it is already inside the enclosing hold's child tree,
// which that lock stops when it must. Exits as a run whose child could not start when the exec
// fails.
[[noreturn]] void run_reentrant(const Options& options);

}  // namespace lk
