#pragma once
// What a server answered over HTTP, as the backends read it.
#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "util/error.hpp"

namespace lk {

struct HttpResponse {
  long status = 0;
  std::string reason;  // the status line's reason phrase, when the server sent one
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case

  // "503 Service Unavailable": the status as a user reads it, made printable.
  std::string status_text() const;
  // The server's Retry-After, when it is given in seconds (the date form is not honoured).
  std::optional<std::chrono::seconds> retry_after() const;
};

// No reply body is worth more than this: Consul caps a value at 512 KB and etcd a request at
// 1.5 MB, so anything past it is a server gone wrong, and must not grow the process without end.
constexpr std::size_t kMaxReplyBody = 4 << 20;

// A reply whose body passed kMaxReplyBody; the transfer was cut there.
struct ReplyTooLarge : Error {
  using Error::Error;
};

}  // namespace lk
