#pragma once
// What every backend says in the same words, declared once: how a wait ends without a fault, a
// reply that does not fit, a prefix used the other way, and how long giving a hold up may take.
#include <chrono>
#include <string>

#include "util/error.hpp"

namespace lk {

// The wait ended because of the deadline or an interruption, not because of a fault.
struct AcquireTimeout : Error {
  using Error::Error;
};
struct Interrupted : Error {
  using Error::Error;
};

// A wait or a request cut short because what may wake it said stop; it carries no reason, which
// the one who set the wake knows (for an acquisition: lease/leased_acquire.hpp).
struct Cancelled : Error {
  using Error::Error;
};

// A server's reply that does not fit what was asked: worth asking again, never a result. The
// decoders say what is wrong with it ("ModifyIndex missing"); the clients put the server and the
// operation in front.
struct MalformedReply : Error {
  using Error::Error;
};

// A prefix in use the other way, in Consul's words, which users of `consul lock` already search
// for; `why`, when known, says what tells ("p/sem2-x is a semaphore's").
inline Error not_lock_use(const std::string& why = "") {
  return Error("Existing key does not match lock use" + (why.empty() ? "" : " (" + why + ")"));
}
inline Error not_semaphore_use(const std::string& why = "") {
  return Error("Existing key does not match semaphore use" + (why.empty() ? "" : " (" + why + ")"));
}
inline Error limit_conflict(int theirs, int ours) {
  return Error("semaphore limit conflict (lock: " + std::to_string(theirs) +
               ", local: " + std::to_string(ours) + ")");
}

// After the child has ended, giving the hold up (and the lease or session with it) takes this
// long at most, even when the server hangs; past it, what is left expires by itself. 3 s from
// the child's end to our exit, less what noticing the end and exiting take.
constexpr std::chrono::milliseconds kReleaseBudget{2800};

}  // namespace lk
