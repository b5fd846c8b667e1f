#include "runner/watchdog_protocol.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace lk::watchdog {
namespace {

// Well under the smallest send buffer a datagram must fit in.
constexpr std::size_t kPiece = 32 << 10;
constexpr std::size_t kMaxFds = 16;

bool sent(int socket, msghdr& message) {
  for (;;) {
    if (sendmsg(socket, &message, MSG_NOSIGNAL) >= 0) return true;
    if (errno != EINTR) return false;
  }
}

ssize_t received(int socket, msghdr& message) {
  for (;;) {
    ssize_t n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    if (n >= 0 || errno != EINTR) return n;
  }
}

}  // namespace

bool send_spawn(int socket, const SpawnMessage& head, const std::string& environment,
                const std::vector<int>& fds) {
  iovec iov{const_cast<SpawnMessage*>(&head), sizeof head};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  if (fds.size() > kMaxFds) throw std::logic_error("more descriptors than a spawn carries");
  if (!fds.empty()) {
    std::size_t n = fds.size();
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * n);
    cmsghdr* c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * n);
  }
  if (!sent(socket, message)) return false;
  for (std::size_t at = 0; at < environment.size(); at += kPiece) {
    iovec piece{const_cast<char*>(environment.data() + at), std::min(kPiece, environment.size() - at)};
    msghdr more{};
    more.msg_iov = &piece;
    more.msg_iovlen = 1;
    if (!sent(socket, more)) return false;
  }
  return true;
}

std::optional<Spawn> receive_spawn(int socket) {
  SpawnMessage head{};
  iovec iov{&head, sizeof head};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  if (received(socket, message) != sizeof head || head.command.command != Command::spawn)
    return std::nullopt;
  Spawn spawn;
  spawn.take_terminal = head.command.take_terminal;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      spawn.fds.emplace_back(fd);
    }
  }
  std::string environment(head.environment_size, '\0');
  for (std::size_t at = 0; at < environment.size();) {
    iovec piece{environment.data() + at, environment.size() - at};
    msghdr more{};
    more.msg_iov = &piece;
    more.msg_iovlen = 1;
    ssize_t n = received(socket, more);
    if (n <= 0) return std::nullopt;
    at += static_cast<std::size_t>(n);
  }
  for (std::size_t at = 0; at < environment.size();) {
    std::size_t end = environment.find('\0', at);
    std::string entry = environment.substr(at, end - at);
    std::size_t eq = entry.find('=');
    spawn.env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    at = end + 1;
  }
  return spawn;
}

}  // namespace lk::watchdog
