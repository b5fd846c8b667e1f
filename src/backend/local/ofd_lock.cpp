#include "backend/local/ofd_lock.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <vector>

#include "util/unique_fd.hpp"

namespace lk {
namespace {

struct flock whole_file(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  return fl;  // l_start = l_len = 0: the whole file, however large it grows
}

// One blocking F_OFD_SETLKW per target, each on its own thread, because the kernel offers no way
// to wait for "any of these locks" in one call and a blocked fcntl cannot be polled.
// F_OFD_SETLKW is a cancellation point, so an abandoned wait is withdrawn with pthread_cancel.
struct Waiter {
  LockTarget target;
  int done_fd;
  pthread_t thread{};
  bool started = false;
  std::atomic<int> result{-1};        // -1 pending, 0 locked, else errno
  std::atomic<bool> finished{false};  // set last: from then on the thread touches nothing of ours

  static void* run(void* self_ptr) {
    auto* self = static_cast<Waiter*>(self_ptr);
    struct flock fl = whole_file(static_cast<short>(self->target.kind));
    int rc;
    while ((rc = fcntl(self->target.fd, F_OFD_SETLKW, &fl)) < 0 && errno == EINTR) {
    }
    // From here on a cancellation must not act: the outcome has to reach lock_any.
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, nullptr);
    self->result.store(rc == 0 ? 0 : errno);
    uint64_t one = 1;
    (void)!write(self->done_fd, &one, sizeof one);
    self->finished.store(true);
    return nullptr;
  }
};

// Cancels and joins every waiter; whatever lock a waiter took in the meantime stays with it. One
// that has finished is detached instead: the exit of its thread (0.1 ms) need not delay a holder.
void stop_all(std::vector<Waiter>& waiters) {
  for (auto& w : waiters)
    if (w.started && !w.finished.load()) pthread_cancel(w.thread);
  for (auto& w : waiters) {
    if (!w.started) continue;
    if (w.finished.load()) pthread_detach(w.thread);
    else pthread_join(w.thread, nullptr);
    w.started = false;
  }
}

void unlock_all(std::vector<Waiter>& waiters) {
  for (auto& w : waiters)
    if (w.result.load() == 0) unlock(w.target.fd);
}

std::optional<std::size_t> keep_first_locked(std::vector<Waiter>& waiters) {
  std::optional<std::size_t> winner;
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    if (waiters[i].result.load() != 0) continue;
    if (!winner) winner = i;
    else unlock(waiters[i].target.fd);
  }
  return winner;
}

}  // namespace

bool try_lock(int fd, LockKind kind) {
  struct flock fl = whole_file(static_cast<short>(kind));
  if (fcntl(fd, F_OFD_SETLK, &fl) == 0) return true;
  if (errno == EAGAIN || errno == EACCES) return false;
  throw sys_error("cannot lock");
}

void unlock(int fd) {
  struct flock fl = whole_file(F_UNLCK);
  fcntl(fd, F_OFD_SETLK, &fl);
}

bool is_locked_elsewhere(int fd) {
  struct flock fl = whole_file(F_WRLCK);
  if (fcntl(fd, F_OFD_GETLK, &fl) < 0) throw sys_error("cannot query lock");
  return fl.l_type != F_UNLCK;
}

std::optional<std::size_t> lock_any(std::span<const LockTarget> targets, Deadline deadline,
                                    const Interrupt& interrupt) {
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (try_lock(targets[i].fd, targets[i].kind)) return i;
  if (deadline.passed()) return std::nullopt;

  UniqueFd done(eventfd(0, EFD_CLOEXEC));
  if (!done) throw sys_error("eventfd");
  std::vector<Waiter> waiters(targets.size());
  struct Joiner {
    std::vector<Waiter>& w;
    ~Joiner() { stop_all(w); }
  } joiner{waiters};
  for (std::size_t i = 0; i < targets.size(); ++i) {
    waiters[i].target = targets[i];
    waiters[i].done_fd = done.get();
    if (int err = pthread_create(&waiters[i].thread, nullptr, &Waiter::run, &waiters[i]))
      throw sys_error("cannot start a lock waiter", err);
    waiters[i].started = true;
  }

  for (;;) {
    pollfd fds[2] = {{done.get(), POLLIN, 0}, {interrupt.fd, POLLIN, 0}};
    timespec ts;
    int n = ppoll(fds, interrupt.fd >= 0 ? 2 : 1, deadline.remaining(ts), nullptr);
    if (n < 0 && errno != EINTR) throw sys_error("poll");
    if (n > 0 && (fds[0].revents & POLLIN)) {
      uint64_t count;
      (void)!read(done.get(), &count, sizeof count);
      for (auto& w : waiters) {
        int r = w.result.load();
        if (r > 0) {
          stop_all(waiters);
          unlock_all(waiters);
          throw sys_error("cannot wait for lock", r);
        }
      }
      break;
    }
    if (n > 0 && (fds[1].revents & POLLIN) && !interrupt.keep_going()) {
      stop_all(waiters);
      unlock_all(waiters);
      throw Interrupted("interrupted while waiting for the lock");
    }
    if (deadline.passed()) break;
  }
  stop_all(waiters);
  return keep_first_locked(waiters);
}

}  // namespace lk
