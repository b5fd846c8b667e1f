#include "util/deadline_timer.hpp"

#include <sys/timerfd.h>

#include "util/error.hpp"

namespace lk {

UniqueFd deadline_timer(const Deadline& deadline) {
  UniqueFd timer(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!timer) throw sys_error("timerfd_create");
  set_deadline_timer(timer.get(), deadline);
  return timer;
}

void set_deadline_timer(int timer, const Deadline& deadline) {
  itimerspec spec{};  // all zero: disarmed
  timespec left;
  if (const timespec* t = deadline.remaining(left)) {
    spec.it_value = *t;
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0)
      spec.it_value.tv_nsec = 1;  // 0 disarms
  }
  timerfd_settime(timer, 0, &spec, nullptr);
}

}  // namespace lk
