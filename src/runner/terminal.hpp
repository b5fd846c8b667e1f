#pragma once
#include <sys/types.h>

namespace lk {

// An interactive child (-pass-stdin on a terminal) must own the terminal while it runs, as a
// shell's foreground job does, or reading the keyboard would stop it with SIGTTIN.
class Foreground {
 public:
  // True when stdin is a terminal whose foreground group is ours.
  static bool available();
  // `active`: the child's stdin is our terminal.
  explicit Foreground(bool active) : active_(active) {}
  ~Foreground() { give_back(); }
  Foreground(const Foreground&) = delete;
  Foreground& operator=(const Foreground&) = delete;

  void set_child(pid_t pgid) { child_ = pgid; }
  // Gives the terminal back to our group, but only if the child's group still has it: if the
  // user's shell took it (we were put in the background), taking it would rob the shell.
  void give_back();
  // After we were continued: hands the terminal to the child again if we are in the foreground.
  void hand_over();
  bool active() const { return active_; }

 private:
  bool active_;
  pid_t child_ = -1;
};

}  // namespace lk
