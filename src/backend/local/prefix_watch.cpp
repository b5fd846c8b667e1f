#include "backend/local/prefix_watch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>

#include "util/error.hpp"

namespace lk {
namespace {

constexpr std::uint32_t kStateEvents =
    IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR;
constexpr std::uint32_t kPrefixEvents =
    IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE | IN_ONLYDIR;

// inotify takes a path; the one of a descriptor we hold names what we opened, whatever has been
// renamed or mounted over since.
std::string path_of(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

}  // namespace

PrefixWatch::PrefixWatch(int state_fd, std::string name)
    : state_fd_(state_fd),
      name_(std::move(name)),
      inotify_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
  if (!inotify_) throw sys_error("cannot watch the state directory (inotify)");
  state_wd_ = inotify_add_watch(inotify_.get(), path_of(state_fd_).c_str(), kStateEvents);
  if (state_wd_ < 0) throw sys_error("cannot watch the state directory");
}

void PrefixWatch::arm() {
  UniqueFd dir(openat(state_fd_, name_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    if (errno == ENOENT) return;  // its making shows on the state directory
    throw sys_error("cannot open the prefix's directory " + name_);
  }
  // The same directory gives the same watch again; a new one gets its own, and the old one's
  // goes with it.
  if (inotify_add_watch(inotify_.get(), path_of(dir.get()).c_str(), kPrefixEvents) < 0)
    throw sys_error("cannot watch the prefix's directory " + name_);
}

PrefixWatch::Woken PrefixWatch::wait(Deadline deadline, const Interrupt& interrupt) {
  for (;;) {
    pollfd fds[] = {{inotify_.get(), POLLIN, 0}, {interrupt.fd, POLLIN, 0}};
    timespec storage;
    int n = ppoll(fds, interrupt.fd < 0 ? 1 : 2, deadline.remaining(storage), nullptr);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw sys_error("cannot wait for the state directory's events");
    if (n == 0) return Woken::deadline;
    if ((fds[1].revents & POLLIN) && !interrupt.keep_going()) return Woken::stop;
    if ((fds[0].revents & POLLIN) && drain()) return Woken::event;
  }
}

// Whether one of the events read concerns the prefix: on its directory, or its directory's own
// on the state directory (not other prefixes'). What changed does not matter: the caller looks
// again. An overflowed queue says so with an event of its own, which counts.
bool PrefixWatch::drain() {
  bool ours = false;
  alignas(inotify_event) char buffer[4096];
  for (ssize_t n; (n = read(inotify_.get(), buffer, sizeof buffer)) > 0;) {
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buffer + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      ours = ours || e->wd != state_wd_ || (e->len > 0 && name_ == e->name);
    }
  }
  return ours;
}

}  // namespace lk
