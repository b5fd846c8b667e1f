#pragma once
// Someone at a terminal who waits more than a few seconds is told once what they wait for,
// rather than left looking at silence. Scripts and logs (stderr not a terminal) see nothing.
#include <chrono>
#include <functional>
#include <string>

#include "backend/backend.hpp"
#include "util/unique_fd.hpp"

namespace lk {

class WaitNotice {
 public:
  // fd() watches `signals_fd`, `also_fd` (-1: none) and the notice's timer.
  WaitNotice(int signals_fd, int also_fd, std::chrono::seconds after);
  int fd() const { return poll_.get(); }
  // Call when fd() is readable: prints the notice if its time has come (once).
  void maybe_print(const std::function<std::string()>& what);

 private:
  UniqueFd poll_, timer_;
};

}  // namespace lk
