#include "runner/terminal.hpp"

#include <unistd.h>

namespace lk {

bool Foreground::available() {
  return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
}

// SIGTTOU is blocked (see signals.cpp), so these work from the background too.
void Foreground::give_back() {
  if (active_ && child_ > 0 && tcgetpgrp(STDIN_FILENO) == child_)
    tcsetpgrp(STDIN_FILENO, getpgrp());
}

void Foreground::hand_over() {
  if (active_ && child_ > 0 && tcgetpgrp(STDIN_FILENO) == getpgrp())
    tcsetpgrp(STDIN_FILENO, child_);
}

}  // namespace lk
