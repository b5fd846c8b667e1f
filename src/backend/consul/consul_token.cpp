#include "backend/consul/consul_token.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/printable.hpp"
#include "util/unique_fd.hpp"

namespace lk {
namespace {

// A token is a few dozen bytes: the file is read only when it is a regular file, and only so far,
// so that a FIFO cannot hang us and /dev/zero cannot grow us without end.
constexpr std::size_t kMaxToken = 64 << 10;

// As ssh says of a private key: a warning, since consul lock reads such a file without one. Once
// a run: the runner reads the status again and again while it waits.
void warn_if_readable_by_others(const std::string& where, mode_t mode) {
  static bool said = false;
  if (said || !(mode & (S_IRGRP | S_IROTH))) return;
  said = true;
  fmt::print(stderr, "lock: {} can be read by others (mode {:04o}); chmod go-r it\n", where,
             static_cast<unsigned>(mode & 07777));
}

}  // namespace

std::string consul_token(const std::string& token_text, const std::string& token_file) {
  if (token_file.empty()) return token_text;
  std::string where = "the token file " + printable(token_file);
  UniqueFd fd(open(token_file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  struct stat st;
  if (!fd || fstat(fd.get(), &st) < 0) throw sys_error("cannot read " + where);
  if (!S_ISREG(st.st_mode)) throw Error(where + " is not a regular file");
  warn_if_readable_by_others(where, st.st_mode);
  std::string token(kMaxToken + 1, '\0');
  std::size_t got = 0;
  for (ssize_t n; got < token.size(); got += static_cast<std::size_t>(n)) {
    n = read(fd.get(), token.data() + got, token.size() - got);
    if (n < 0 && errno == EINTR) n = 0;
    else if (n < 0) throw sys_error("cannot read " + where);
    else if (n == 0) break;
  }
  if (got > kMaxToken) throw Error(where + " is larger than 64 KiB; a Consul token is a UUID");
  token.resize(got);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.front())))
    token.erase(0, 1);
  return token.empty() ? token_text : token;
}

}  // namespace lk
