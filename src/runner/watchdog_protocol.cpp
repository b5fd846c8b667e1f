#include "runner/watchdog_protocol.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "util/error.hpp"

namespace lk::watchdog {
namespace {

// Well under the smallest send buffer a datagram must fit in (net.core.wmem_default may be set
// low); an environment larger than that, a long prefix's, takes several.
constexpr std::size_t kPiece = 4 << 10;
constexpr std::size_t kMaxFds = 16;

// False when the watchdog is gone; any other failure is ours to report.
bool sent(int socket, msghdr& message) {
  for (;;) {
    if (sendmsg(socket, &message, MSG_NOSIGNAL) >= 0) return true;
    if (errno == EPIPE || errno == ECONNRESET) return false;
    if (errno != EINTR) throw sys_error("cannot hand the child over to the watchdog");
  }
}

ssize_t received(int socket, msghdr& message) {
  for (;;) {
    ssize_t n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    if (n >= 0 || errno != EINTR) return n;
  }
}

}  // namespace

// The head and as much of the environment as fits go in the first datagram, with the
// descriptors; the rest, if any, in more.
bool send_spawn(int socket, const SpawnMessage& head, const std::string& environment,
                const std::vector<int>& fds) {
  if (fds.size() > kMaxFds) throw std::logic_error("more descriptors than a spawn carries");
  std::size_t first = std::min(kPiece, environment.size());
  iovec iov[2] = {{const_cast<SpawnMessage*>(&head), sizeof head},
                  {const_cast<char*>(environment.data()), first}};
  msghdr message{};
  message.msg_iov = iov;
  message.msg_iovlen = 2;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  if (!fds.empty()) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  if (!sent(socket, message)) return false;
  for (std::size_t at = first; at < environment.size(); at += kPiece) {
    iovec piece{const_cast<char*>(environment.data() + at),
                std::min(kPiece, environment.size() - at)};
    msghdr more{};
    more.msg_iov = &piece;
    more.msg_iovlen = 1;
    if (!sent(socket, more)) return false;
  }
  return true;
}

std::optional<Spawn> receive_spawn(int socket) {
  SpawnMessage head{};
  std::string environment(kPiece, '\0');
  iovec iov[2] = {{&head, sizeof head}, {environment.data(), environment.size()}};
  msghdr message{};
  message.msg_iov = iov;
  message.msg_iovlen = 2;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t n = received(socket, message);
  if (n < static_cast<ssize_t>(sizeof head) || head.command.command != Command::spawn)
    return std::nullopt;
  Spawn spawn;
  spawn.take_terminal = head.command.take_terminal;
  spawn.report_start = head.command.report_start;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      spawn.fds.emplace_back(fd);
    }
  }
  std::size_t at = static_cast<std::size_t>(n) - sizeof head;
  environment.resize(std::max<std::size_t>(head.environment_size, at));
  while (at < head.environment_size) {
    iovec piece{environment.data() + at, environment.size() - at};
    msghdr more{};
    more.msg_iov = &piece;
    more.msg_iovlen = 1;
    ssize_t got = received(socket, more);
    if (got <= 0) return std::nullopt;
    at += static_cast<std::size_t>(got);
  }
  environment.resize(head.environment_size);
  for (std::size_t start = 0; start < environment.size();) {
    std::size_t end = environment.find('\0', start);
    std::string entry = environment.substr(start, end - start);
    std::size_t eq = entry.find('=');
    spawn.env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    start = end + 1;
  }
  return spawn;
}

}  // namespace lk::watchdog
