#pragma once
// What lock and its watchdog tell each other: fixed-size messages on a socket pair (a datagram
// each, in order: SOCK_SEQPACKET), and the lease-safe deadline in memory they share, which lock
// moves at every confirmed renewal without waking the watchdog.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "util/unique_fd.hpp"

namespace lk::watchdog {

// lock → watchdog.
enum class Command : std::uint8_t {
  spawn,    // start the child; followed by its added environment ("K=V\0" each) and carrying
            // the hold's descriptors, which the watchdog keeps open until the tree is gone
  forward,  // pass `sig` on to the child's process group
  stop,     // begin the stop with `sig` (once begun, as `forward`)
  resume,   // SIGCONT to the group: we were continued after the child's stop for job control
};

struct CommandMessage {
  Command command;
  bool take_terminal = false;  // spawn: make the child's group the terminal's foreground
  bool report_start = false;   // spawn: report `started` (else its pid comes with its end)
  int sig = 0;
};

// The spawn command, sent with the hold's descriptors and followed by the child's added
// environment, in as many datagrams as it takes (a prefix may be long).
struct SpawnMessage {
  CommandMessage command;
  std::uint64_t environment_size = 0;
};
bool send_spawn(int socket, const SpawnMessage& head, const std::string& environment,
                const std::vector<int>& fds);  // false when the watchdog is gone

struct Spawn {
  bool take_terminal = false;
  bool report_start = false;
  EnvVars env;
  std::vector<UniqueFd> fds;
};
std::optional<Spawn> receive_spawn(int socket);  // nullopt when lock is gone

// watchdog → lock.
enum class Report : std::uint8_t {
  started,   // when asked for; pid; error: errno of a failed exec, else 0
  refused,   // the stop was due before the child could start: it never ran
  stopped,   // the child stopped for job control; sig
  signal,    // the child sent its parent (the watchdog) `sig`: meant for lock, which it was
  exited,    // the child ended before the rest of its tree; pid, error as for `started`;
             // signaled, code; sig: the signal of the stop this began (for what it left
             // behind), 0 when one was under way
  deadline,  // the lease-safe deadline came without a renewal: the watchdog began the stop
  killing,   // the grace period (or the deadline) ran out: SIGKILL to what is left of the tree
  gone,      // the tree is gone and the hold's descriptors closed; the watchdog exits. With
             // `ended`, the child's end comes with it (it was the last of the tree to go);
             // `late`: the tree outlived the lease-safe deadline
};

struct ReportMessage {
  Report report;
  pid_t pid = 0;
  int error = 0;
  int sig = 0;
  bool signaled = false;
  int code = 0;
  bool ended = false;
  bool late = false;
};

// In memory shared by the two: the lease-safe deadline on the boot clock, in nanoseconds; 0 for
// none. Lock-free, so that it works across processes.
struct Shared {
  std::atomic<std::int64_t> dead_by_ns{0};
};
static_assert(std::atomic<std::int64_t>::is_always_lock_free);

}  // namespace lk::watchdog
