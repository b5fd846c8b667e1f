#pragma once
#include "util/deadline.hpp"
#include "util/unique_fd.hpp"

namespace lk {

// A descriptor that becomes readable when `deadline` passes (never, for no deadline), for a wait
// that polls other descriptors too. Throws Error when the kernel gives no timer.
UniqueFd deadline_timer(const Deadline& deadline);

// Sets such a descriptor to `deadline` instead, and unreadable until then: one timer can stand for
// a deadline that moves.
void set_deadline_timer(int timer, const Deadline& deadline);

}  // namespace lk
