#pragma once
#include "util/deadline.hpp"
#include "util/unique_fd.hpp"

namespace lk {

// A descriptor that becomes readable when `deadline` passes (never, for no deadline), for a wait
// that polls other descriptors too. Throws Error when the kernel gives no timer.
UniqueFd deadline_timer(const Deadline& deadline);

}  // namespace lk
