#pragma once
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace lk {

// Every failure a user can act on is one of these; main() turns them into exit status 1.
// UsageError additionally earns a pointer to -help.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct UsageError : Error {
  using Error::Error;
};

// A system call failed: "what: strerror(errno)".
inline Error sys_error(const std::string& what, int err = errno) {
  return Error(what + ": " + std::strerror(err));
}

}  // namespace lk
