#include "runner/watchdog_protocol.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

using lk::UniqueFd;
using namespace lk::watchdog;

namespace {

struct Pair {
  UniqueFd lock, watchdog;
  Pair() {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    lock.reset(sv[0]);
    watchdog.reset(sv[1]);
  }
};

std::string environment_of(const lk::EnvVars& env) {
  std::string out;
  for (const auto& [key, value] : env) out += key + "=" + value + '\0';
  return out;
}

}  // namespace

TEST_CASE("a spawn carries the environment, the flags and the descriptors across") {
  Pair p;
  lk::EnvVars env{{"LOCK_PREFIX", "a=b"}, {"LOCK_FENCING_TOKEN", "7"}, {"EMPTY", ""}};
  UniqueFd file(open("/dev/null", O_RDONLY | O_CLOEXEC));
  std::string environment = environment_of(env);
  SpawnMessage head{{Command::spawn, true, false, 0}, environment.size()};
  REQUIRE(send_spawn(p.lock.get(), head, environment, {file.get()}));
  auto spawn = receive_spawn(p.watchdog.get());
  REQUIRE(spawn);
  CHECK(spawn->take_terminal);
  CHECK_FALSE(spawn->report_start);
  CHECK(spawn->env == env);
  REQUIRE(spawn->fds.size() == 1);
  struct stat ours, theirs;
  REQUIRE(fstat(file.get(), &ours) == 0);
  REQUIRE(fstat(spawn->fds[0].get(), &theirs) == 0);
  CHECK(ours.st_ino == theirs.st_ino);
  CHECK((fcntl(spawn->fds[0].get(), F_GETFD) & FD_CLOEXEC));  // until the child takes it on
}

TEST_CASE("an environment larger than a datagram comes in pieces, whole") {
  Pair p;
  lk::EnvVars env{{"LOCK_KEY", std::string(200'000, 'k')},
                  {"LOCK_PREFIX", std::string(70'000, 'p')}};
  std::string environment = environment_of(env);
  SpawnMessage head{{Command::spawn, false, true, 0}, environment.size()};
  // The socket holds less than the whole: the sender waits for the reader, as lock waits for
  // its watchdog.
  std::thread sender([&] { CHECK(send_spawn(p.lock.get(), head, environment, {})); });
  auto spawn = receive_spawn(p.watchdog.get());
  sender.join();
  REQUIRE(spawn);
  CHECK(spawn->report_start);
  CHECK(spawn->env == env);
  CHECK(spawn->fds.empty());
}

TEST_CASE("lock gone before a spawn, or one cut short, is no spawn") {
  SUBCASE("gone") {
    Pair p;
    p.lock.reset();
    CHECK_FALSE(receive_spawn(p.watchdog.get()));
  }
  SUBCASE("cut short") {
    Pair p;
    std::string environment(100'000, 'x');
    SpawnMessage head{{Command::spawn, false, false, 0}, environment.size()};
    REQUIRE(send(p.lock.get(), &head, sizeof head, 0) == sizeof head);  // and nothing more
    p.lock.reset();
    CHECK_FALSE(receive_spawn(p.watchdog.get()));
  }
  SUBCASE("the watchdog gone") {
    Pair p;
    p.watchdog.reset();
    SpawnMessage head{{Command::spawn, false, false, 0}, 0};
    CHECK_FALSE(send_spawn(p.lock.get(), head, "", {}));
  }
}
