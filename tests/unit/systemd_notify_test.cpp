#include "runner/systemd_notify.hpp"

#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace lk;

namespace {

// A datagram socket bound where NOTIFY_SOCKET points, as systemd's would be.
struct Listener {
  UniqueFd fd{socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  std::string name;

  explicit Listener(std::string address) : name(std::move(address)) {
    sockaddr_un at{};
    at.sun_family = AF_UNIX;
    std::memcpy(at.sun_path, name.data(), name.size());
    if (name[0] == '@') at.sun_path[0] = '\0';
    else unlink(name.c_str());
    auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    REQUIRE(bind(fd.get(), reinterpret_cast<sockaddr*>(&at), length) == 0);
  }
  ~Listener() {
    if (name[0] == '/') unlink(name.c_str());
  }

  // Every datagram that arrives within `wait_ms` of the last one.
  std::vector<std::string> take(int wait_ms = 50) {
    std::vector<std::string> out;
    pollfd p{fd.get(), POLLIN, 0};
    while (poll(&p, 1, wait_ms) > 0) {
      char buf[4096];
      ssize_t n = recv(fd.get(), buf, sizeof buf, 0);
      if (n < 0) break;
      out.emplace_back(buf, static_cast<std::size_t>(n));
    }
    return out;
  }
};

std::string unique_path() { return "/tmp/lock-notify-test-" + std::to_string(getpid()); }

}  // namespace

TEST_CASE("without NOTIFY_SOCKET nothing is opened, and the watchdog variables go all the same") {
  unsetenv("NOTIFY_SOCKET");
  setenv("WATCHDOG_USEC", "1000000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  SystemdNotify n;
  CHECK_FALSE(n);
  CHECK(n.timer_fd() == -1);
  CHECK(std::getenv("WATCHDOG_USEC") == nullptr);
  CHECK(std::getenv("WATCHDOG_PID") == nullptr);
  n.status("x");  // no-ops
  n.ready();
  CHECK_FALSE(n.tick());
}

TEST_CASE("messages go to a path socket, status only when it changes, READY=1 once") {
  Listener l(unique_path());
  setenv("NOTIFY_SOCKET", l.name.c_str(), 1);
  SystemdNotify n;
  REQUIRE(n);
  CHECK(std::getenv("NOTIFY_SOCKET") == nullptr);  // the child must not inherit it
  n.status("waiting for p");
  n.status("waiting for p");
  n.status("two\nlines");
  n.ready();
  n.ready();
  n.stopping("stopping the child: received SIGTERM");
  n.stopping("the child exited (signal 15); releasing the lock");
  CHECK(l.take() ==
        std::vector<std::string>{"STATUS=waiting for p", "STATUS=two lines", "READY=1",
                                 "STOPPING=1\nSTATUS=stopping the child: received SIGTERM",
                                 "STATUS=the child exited (signal 15); releasing the lock"});
}

TEST_CASE("an abstract address starts with @") {
  Listener l("@lock-notify-test-" + std::to_string(getpid()));
  setenv("NOTIFY_SOCKET", l.name.c_str(), 1);
  SystemdNotify n;
  n.ready();
  CHECK(l.take() == std::vector<std::string>{"READY=1"});
}

TEST_CASE("the watchdog pings at half its interval, only for the pid systemd named") {
  Listener l(unique_path());
  setenv("NOTIFY_SOCKET", l.name.c_str(), 1);
  setenv("WATCHDOG_USEC", "200000", 1);
  unsetenv("WATCHDOG_PID");
  SystemdNotify n;
  REQUIRE(n.timer_fd() >= 0);
  pollfd p{n.timer_fd(), POLLIN, 0};
  // Ten ticks, 100 ms apart: a ping each, and one refresh of the status, about 0.5 s in (the
  // next is 2 s later).
  auto start = Clock::now();
  std::vector<int> refreshes;
  for (int i = 0; i < 10; ++i) {
    REQUIRE(poll(&p, 1, 2000) == 1);
    if (n.tick()) refreshes.push_back(i);
  }
  CHECK(Clock::now() - start >= std::chrono::milliseconds(950));
  REQUIRE(refreshes.size() == 1);
  CHECK(refreshes[0] >= 3);
  CHECK(refreshes[0] <= 5);
  CHECK(l.take() == std::vector<std::string>(10, "WATCHDOG=1"));

  setenv("NOTIFY_SOCKET", l.name.c_str(), 1);
  setenv("WATCHDOG_USEC", "200000", 1);
  setenv("WATCHDOG_PID", "1", 1);  // another process of the unit pings
  SystemdNotify other;
  pollfd q{other.timer_fd(), POLLIN, 0};
  REQUIRE(poll(&q, 1, 2000) == 1);
  other.tick();
  CHECK(l.take().empty());
}

TEST_CASE("the shortest watchdog interval still pings") {
  // Half of WATCHDOG_USEC=1 is below the timer's unit: rounded down, it would disarm the timer.
  Listener l(unique_path());
  setenv("NOTIFY_SOCKET", l.name.c_str(), 1);
  setenv("WATCHDOG_USEC", "1", 1);
  unsetenv("WATCHDOG_PID");
  SystemdNotify n;
  REQUIRE(n.timer_fd() >= 0);
  pollfd p{n.timer_fd(), POLLIN, 0};
  for (int i = 0; i < 3; ++i) {
    REQUIRE(poll(&p, 1, 2000) == 1);
    n.tick();
  }
  CHECK(l.take() == std::vector<std::string>(3, "WATCHDOG=1"));
}

TEST_CASE("an address lock cannot use, or nobody listening, is no error") {
  for (const char* bogus : {"x", "vsock:2:1234", "/nonexistent/socket"}) {
    setenv("NOTIFY_SOCKET", bogus, 1);
    SystemdNotify n;
    CHECK_NOTHROW(n.ready());
    CHECK_NOTHROW(n.status("s"));
  }
  setenv("NOTIFY_SOCKET", ("/" + std::string(200, 'a')).c_str(), 1);
  SystemdNotify too_long;
  CHECK_FALSE(too_long);
}
