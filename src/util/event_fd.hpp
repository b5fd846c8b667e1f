#pragma once
// A descriptor that another thread, or a C library's callback, makes readable: how a wait on
// descriptors is told to stop, a loss announced, an answer handed over.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace lk {

class EventFd {
 public:
  EventFd() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!fd_) throw sys_error("eventfd");
  }
  int fd() const { return fd_.get(); }
  // Readable from now on, until drain(). Safe from any thread, and from a signal handler.
  void notify() const {
    std::uint64_t one = 1;
    (void)!write(fd_.get(), &one, sizeof one);
  }
  void drain() const {
    std::uint64_t n;
    (void)!read(fd_.get(), &n, sizeof n);
  }

 private:
  UniqueFd fd_;
};

}  // namespace lk
