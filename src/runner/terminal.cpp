#include "runner/terminal.hpp"

#include <unistd.h>

namespace lk {

bool Foreground::available() {
  return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
}

// SIGTTOU is blocked (see signals.cpp), so this works from the background too.
Foreground::~Foreground() {
  if (active_) tcsetpgrp(STDIN_FILENO, getpgrp());
}

}  // namespace lk
