#pragma once
#include <sys/types.h>

namespace lk {

// An interactive child (-pass-stdin on a terminal) must own the terminal while it runs, as a
// shell's foreground job does, or reading the keyboard would stop it with SIGTTIN.
class Foreground {
 public:
  // True when stdin is a terminal whose foreground group is ours.
  static bool available();
  explicit Foreground(bool active) : active_(active) {}
  ~Foreground();  // gives the terminal back to our group
  Foreground(const Foreground&) = delete;
  Foreground& operator=(const Foreground&) = delete;

 private:
  bool active_;
};

}  // namespace lk
