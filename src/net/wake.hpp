#pragma once
// What every network backend's waits share, whatever the protocol: the errors worth retrying,
// and what may cut a wait short (our own descriptors: signals, the lease keeper).
#include <chrono>
#include <functional>
#include <optional>
#include <vector>

#include "util/error.hpp"

namespace lk {

// The server could not be reached or did not answer in time: worth retrying.
struct NetworkError : Error {
  using Error::Error;
};

// The server answered with a 5xx: as worth retrying as no answer at all, but not the same thing
// to a user ("503 Service Unavailable" is not "unreachable"). `retry_after` is the server's own
// hint, honoured as far as the deadline at hand allows.
struct ServerUnavailable : NetworkError {
  ServerUnavailable(const std::string& what, std::optional<std::chrono::seconds> retry_after)
      : NetworkError(what), retry_after(retry_after) {}
  std::optional<std::chrono::seconds> retry_after;
};

// The server's hint of when to ask again, if the error carries one.
inline std::optional<std::chrono::seconds> retry_after_of(const NetworkError& e) {
  auto* busy = dynamic_cast<const ServerUnavailable*>(&e);
  return busy ? busy->retry_after : std::nullopt;
}

// What may cut a long request short: descriptors to wake on, and whether to go on then.
struct Wake {
  std::vector<int> fds;
  std::function<bool()> keep_going;
};

// Sleeps for `pause`; false, at once, when one of `wake`'s descriptors is readable and it says
// not to go on.
bool pause_unless_woken(std::chrono::milliseconds pause, const Wake* wake);

}  // namespace lk
