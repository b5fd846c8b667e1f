// The state directory's files as someone else may have left them: opened and read as untrusted
// files (util/untrusted_file.hpp, whose tests these are too), removed only when they are ours.
#include "backend/local/state_file.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

using lk::kMaxStateFile;
using lk::open_untrusted_file;
using lk::read_state_file;
using lk::UniqueFd;

namespace {

// A scratch directory, removed with what is in it.
struct Scratch {
  std::string path;
  UniqueFd fd;
  Scratch() {
    char name[] = "/tmp/lock-state-file-XXXXXX";
    REQUIRE(mkdtemp(name));
    path = name;
    fd.reset(open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  ~Scratch() {
    std::string rm = "rm -rf '" + path + "'";
    (void)!std::system(rm.c_str());
  }
  std::string at(const char* name) const { return path + "/" + name; }
};

void write_file(const std::string& path, const std::string& text) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  REQUIRE(fd);
  REQUIRE(write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()));
}

}  // namespace

TEST_CASE("a regular file opens and reads whole") {
  Scratch s;
  write_file(s.at("slot.0"), "{\"pid\":1}");
  UniqueFd fd = open_untrusted_file(s.fd.get(), "slot.0", O_RDONLY);
  REQUIRE(fd);
  CHECK(read_state_file(fd.get()) == std::optional<std::string>("{\"pid\":1}"));
}

TEST_CASE("a FIFO is refused at once, not waited on for a writer") {
  Scratch s;
  REQUIRE(mkfifo(s.at("q.00000000000000000000").c_str(), 0600) == 0);
  for (int flags : {O_RDONLY, O_RDWR, O_RDWR | O_CREAT}) {
    UniqueFd fd = open_untrusted_file(s.fd.get(), "q.00000000000000000000", flags);
    CHECK_FALSE(fd);
    CHECK(errno == ENOTSUP);
  }
}

TEST_CASE("a symbolic link, a directory and a socket are no files of ours") {
  Scratch s;
  write_file(s.at("target"), "x");
  REQUIRE(symlink(s.at("target").c_str(), s.at("link").c_str()) == 0);
  REQUIRE(mkdir(s.at("dir").c_str(), 0700) == 0);
  UniqueFd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, s.at("sock").c_str(), sizeof addr.sun_path - 1);
  REQUIRE(bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  for (const char* name : {"link", "dir", "sock"}) {
    CAPTURE(name);
    UniqueFd fd = open_untrusted_file(s.fd.get(), name, O_RDONLY);
    CHECK_FALSE(fd);
    CHECK(errno == ENOTSUP);
  }
  errno = ENOTSUP;
  std::string said = lk::state_file_error(s.at("link")).what();
  CHECK(said.find("link is not a regular file") != std::string::npos);
}

TEST_CASE("a missing file says ENOENT, and O_CREAT makes a regular one") {
  Scratch s;
  CHECK_FALSE(open_untrusted_file(s.fd.get(), "meta", O_RDONLY));
  CHECK(errno == ENOENT);
  UniqueFd fd = open_untrusted_file(s.fd.get(), "meta", O_RDWR | O_CREAT);
  REQUIRE(fd);
  CHECK(read_state_file(fd.get()) == std::optional<std::string>(""));
}

TEST_CASE("a file larger than a record is unreadable, however large; one just that size is read") {
  Scratch s;
  write_file(s.at("exact"), std::string(kMaxStateFile, 'a'));
  UniqueFd exact = open_untrusted_file(s.fd.get(), "exact", O_RDONLY);
  REQUIRE(exact);
  CHECK(read_state_file(exact.get())->size() == kMaxStateFile);
  write_file(s.at("over"), std::string(kMaxStateFile + 1, 'a'));
  UniqueFd over = open_untrusted_file(s.fd.get(), "over", O_RDONLY);
  CHECK(read_state_file(over.get()) == std::nullopt);
  // 64 GiB, sparse: nothing may be sized from it.
  UniqueFd huge(open(s.at("huge").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  REQUIRE(ftruncate(huge.get(), off_t(64) << 30) == 0);
  UniqueFd read_huge = open_untrusted_file(s.fd.get(), "huge", O_RDONLY);
  CHECK(read_state_file(read_huge.get()) == std::nullopt);
}

TEST_CASE("the size cap is the caller's, and a file one byte over it says EFBIG") {
  Scratch s;
  write_file(s.at("job.prom"), "12345");
  UniqueFd fd = open_untrusted_file(s.fd.get(), "job.prom", O_RDONLY);
  REQUIRE(fd);
  CHECK(lk::read_untrusted_file(fd.get(), 5) == std::optional<std::string>("12345"));
  errno = 0;
  CHECK(lk::read_untrusted_file(fd.get(), 4) == std::nullopt);
  CHECK(errno == EFBIG);
}

TEST_CASE("a path opens as a name in a directory does: a FIFO or a link at its end is refused") {
  Scratch s;
  REQUIRE(mkfifo(s.at("fifo").c_str(), 0600) == 0);
  write_file(s.at("target"), "x");
  REQUIRE(symlink(s.at("target").c_str(), s.at("link").c_str()) == 0);
  for (const char* name : {"fifo", "link"}) {
    CAPTURE(name);
    CHECK_FALSE(open_untrusted_file(AT_FDCWD, s.at(name).c_str(), O_RDONLY));
    CHECK(errno == ENOTSUP);
  }
  CHECK(open_untrusted_file(AT_FDCWD, s.at("target").c_str(), O_RDONLY));
}

TEST_CASE("only a regular file or directory of our own user's is removed") {
  Scratch dir;
  write_file(dir.at("q.1"), "{}");
  REQUIRE(mkfifo(dir.at("fifo").c_str(), 0600) == 0);
  REQUIRE(symlink(dir.at("q.1").c_str(), dir.at("link").c_str()) == 0);
  REQUIRE(mkdir(dir.at("d").c_str(), 0700) == 0);
  CHECK_FALSE(lk::remove_if_ours(dir.fd.get(), "fifo"));
  CHECK_FALSE(lk::remove_if_ours(dir.fd.get(), "link"));
  CHECK_FALSE(lk::remove_if_ours(dir.fd.get(), "d"));  // a directory only when asked for one
  CHECK_FALSE(lk::remove_if_ours(dir.fd.get(), "q.1", AT_REMOVEDIR));
  CHECK(lk::remove_if_ours(dir.fd.get(), "q.1"));
  CHECK(lk::remove_if_ours(dir.fd.get(), "d", AT_REMOVEDIR));
  CHECK_FALSE(lk::remove_if_ours(dir.fd.get(), "gone"));
  struct stat st;
  CHECK(lstat(dir.at("fifo").c_str(), &st) == 0);
  CHECK(lstat(dir.at("link").c_str(), &st) == 0);
  if (geteuid() == 0) {  // a file of another user's needs root to make
    write_file(dir.at("theirs"), "");
    REQUIRE(chown(dir.at("theirs").c_str(), 65534, 65534) == 0);
    CHECK_FALSE(lk::remove_if_ours(dir.fd.get(), "theirs"));
    CHECK(lstat(dir.at("theirs").c_str(), &st) == 0);
  }
}

TEST_CASE("a name still names an open file until it is removed or replaced") {
  Scratch dir;
  write_file(dir.at("q.1"), "");
  UniqueFd fd = open_untrusted_file(dir.fd.get(), "q.1", O_RDONLY);
  REQUIRE(fd);
  CHECK(lk::still_names(dir.fd.get(), "q.1", fd.get()));
  REQUIRE(unlink(dir.at("q.1").c_str()) == 0);
  CHECK_FALSE(lk::still_names(dir.fd.get(), "q.1", fd.get()));
  write_file(dir.at("q.1"), "");  // another file under the same name
  CHECK_FALSE(lk::still_names(dir.fd.get(), "q.1", fd.get()));
}
