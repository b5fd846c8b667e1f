#include "net/connection.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <string>

using lk::Clock;
using lk::Deadline;
using lk::IoWait;
using lk::UniqueFd;
using namespace std::chrono_literals;

namespace {

sockaddr_in loopback(const char* ip) {
  sockaddr_in at{};
  at.sin_family = AF_INET;
  REQUIRE(inet_pton(AF_INET, ip, &at.sin_addr) == 1);
  return at;
}

// A socket bound on `ip`, port chosen by the kernel: listening, or only bound (connects to it are
// refused at once).
struct Port {
  Port(const char* ip, std::optional<int> backlog)
      : fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)), at(loopback(ip)) {
    socklen_t size = sizeof at;
    REQUIRE(bind(fd.get(), reinterpret_cast<sockaddr*>(&at), size) == 0);
    if (backlog) REQUIRE(listen(fd.get(), *backlog) == 0);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&at), &size);
  }
  addrinfo entry(addrinfo* next) {
    addrinfo a{};
    a.ai_family = AF_INET;
    a.ai_socktype = SOCK_STREAM;
    a.ai_addr = reinterpret_cast<sockaddr*>(&at);
    a.ai_addrlen = sizeof at;
    a.ai_next = next;
    return a;
  }
  UniqueFd fd;
  sockaddr_in at;
};

// A listener whose SYNs are dropped, as a host that drops packets does: with a backlog of 0 and
// one connection waiting to be accepted, its accept queue is full, and the kernel drops every
// further SYN. The first connection gets in with a SYN cookie (see can_be_silent()).
struct Silent : Port {
  Silent()
      : Port("127.0.0.2", 0),
        filler(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) {
    connect(filler.get(), reinterpret_cast<sockaddr*>(&at), sizeof at);
    pollfd queued{fd.get(), POLLIN, 0};
    REQUIRE_MESSAGE(poll(&queued, 1, 5000) == 1, "the filler never reached the accept queue");
  }
  UniqueFd filler;
};

// Without SYN cookies a Silent listener cannot be set up: the test says so and is skipped.
bool can_be_silent() {
  std::ifstream f("/proc/sys/net/ipv4/tcp_syncookies");
  int on = 0;
  if (f >> on && on != 0) return true;
  MESSAGE("skipped: SYN cookies are off (net.ipv4.tcp_syncookies)");
  return false;
}

IoWait wait_until(Deadline deadline) {
  return IoWait(deadline, {}, [] { return true; });
}

}  // namespace

TEST_CASE("an address that drops packets gets a share of the time, and the next one is tried") {
  if (!can_be_silent()) return;
  Port server("127.0.0.1", 8);
  Silent silent;

  addrinfo second = server.entry(nullptr);
  addrinfo first = silent.entry(&second);
  auto started = Clock::now();
  IoWait wait = wait_until(Deadline::after(5s));
  UniqueFd fd = lk::connect_any(&first, wait);
  auto took = Clock::now() - started;
  CHECK(fd);
  // Half of the 5 s for the first of two addresses; the connection is made well before the end.
  CHECK(took >= 2400ms);
  CHECK(took < 4s);
  CHECK(wait.deadline().left(10s) > 500ms);  // the request's own deadline is back
}

TEST_CASE("the last address has what is left of the time, and every address's reason is told") {
  if (!can_be_silent()) return;
  Port closed("127.0.0.1", std::nullopt);
  Silent silent;

  addrinfo last = silent.entry(nullptr);
  addrinfo first = closed.entry(&last);
  auto started = Clock::now();
  IoWait wait = wait_until(Deadline::after(1500ms));
  std::string message;
  try {
    lk::connect_any(&first, wait);
  } catch (const lk::NetworkError& e) {
    message = e.what();
  }
  CHECK(message.starts_with("127.0.0.1: Connection refused; 127.0.0.2: timed out after "));
  CHECK(Clock::now() - started >= 1400ms);
}
