#pragma once
// What -status -watch waits on with the local backend: inotify on the state directory (a prefix's
// directory made or removed) and on the prefix's directory. Every change of who holds or waits
// shows there as an event: a record written once its file is locked (a slot's holder, a ticket's
// waiter), a ticket renamed or removed, and the last close of a file opened for writing, which is
// when its lock goes, a killed process's included (the kernel closes its files). Looking at the
// status opens files read-only, whose closes are not watched: a look does not wake the watch.
#include <string>

#include "backend/backend.hpp"
#include "util/unique_fd.hpp"

namespace lk {

class PrefixWatch {
 public:
  PrefixWatch(int state_fd, std::string name);

  // Watches the prefix's directory when it is there, and the one there now when it was made
  // anew. Called before each look at the status, so that no change after the look goes unseen.
  void arm();
  enum class Woken { event, deadline, stop };
  // Until an event, the deadline, or `interrupt` saying stop.
  Woken wait(Deadline deadline, const Interrupt& interrupt);

 private:
  bool drain();

  int state_fd_;
  std::string name_;
  UniqueFd inotify_;
  int state_wd_ = -1;
};

}  // namespace lk
