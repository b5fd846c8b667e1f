#include "net/connection.hpp"

#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>

using lk::Clock;
using lk::Deadline;
using lk::IoWait;
using lk::UniqueFd;
using namespace std::chrono_literals;

namespace {

// A listener on `ip`, port chosen by the kernel. With a backlog of 0 and one connection waiting
// in it, the kernel drops every further SYN: a connect to it hangs, as to a host that drops packets.
struct Listener {
  Listener(const char* ip, int backlog) : fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    at.sin_family = AF_INET;
    REQUIRE(inet_pton(AF_INET, ip, &at.sin_addr) == 1);
    socklen_t size = sizeof at;
    REQUIRE(bind(fd.get(), reinterpret_cast<sockaddr*>(&at), size) == 0);
    REQUIRE(listen(fd.get(), backlog) == 0);
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
  sockaddr_in at{};
};

IoWait wait_until(Deadline deadline) {
  return IoWait(deadline, {}, [] { return true; });
}

}  // namespace

TEST_CASE("an address that drops packets gets a share of the time, and the next one is tried") {
  Listener server("127.0.0.1", 8);
  Listener silent("127.0.0.2", 0);
  UniqueFd filler(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(connect(filler.get(), reinterpret_cast<sockaddr*>(&silent.at), sizeof silent.at) == 0);

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
}

TEST_CASE("the last address has what is left of the time, and its failure is the one told") {
  Listener silent("127.0.0.2", 0);
  UniqueFd filler(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(connect(filler.get(), reinterpret_cast<sockaddr*>(&silent.at), sizeof silent.at) == 0);
  addrinfo only = silent.entry(nullptr);
  auto started = Clock::now();
  IoWait wait = wait_until(Deadline::after(1500ms));
  CHECK_THROWS_WITH_AS(lk::connect_any(&only, wait), doctest::Contains("timed out"), lk::NetworkError);
  CHECK(Clock::now() - started >= 1400ms);
}
