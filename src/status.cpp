#include "status.hpp"

#include <fmt/format.h>
#include <sys/epoll.h>

#include <cstdio>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "runner/signals.hpp"
#include "util/deadline_timer.hpp"
#include "util/json_text.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

constexpr int kNotHeld = 3;

// Scripts read this; a name or host that is not UTF-8 keeps its exact bytes beside it.
nlohmann::json as_json(const HolderRecord& r) {
  nlohmann::json j = {{"pid", r.pid}, {"token", r.token}};
  put_text(j, "host", r.host);
  put_text(j, "name", r.name);
  put_text(j, "since", r.since);
  if (!r.until.empty()) put_text(j, "until", r.until);
  if (!r.value.empty()) put_text(j, "value", r.value);
  return j;
}

// Records are written by other processes, names by users: nothing in them may reach the
// terminal unescaped.
std::string describe(const HolderRecord& r) {
  std::string out = r.who();
  if (!r.name.empty()) out += fmt::format(", name '{}'", printable(r.name));
  if (!r.value.empty()) out += fmt::format(", value '{}'", printable(r.value));
  return out;
}

// What -json prints: one object, which also tells two statuses apart for -watch.
nlohmann::json status_json(const Options& o, const PrefixStatus& s) {
  nlohmann::json out = {{"backend", o.backend},
                        {"limit", s.limit_unknown ? nlohmann::json() : nlohmann::json(s.limit)},
                        {"held", !s.holders.empty()},
                        {"holders", nlohmann::json::array()},
                        {"waiters", nlohmann::json::array()}};
  put_text(out, "prefix", o.prefix);
  for (const auto& r : s.holders) out["holders"].push_back(as_json(r));
  for (const auto& r : s.waiters) out["waiters"].push_back(as_json(r));
  return out;
}

std::string status_text(const Options& o, const PrefixStatus& s) {
  bool held = !s.holders.empty();
  if (!held && s.waiters.empty())
    return fmt::format("prefix '{}': not held\n", printable(o.prefix));
  std::string kind =
      s.limit_unknown
          ? fmt::format("semaphore, {} slots taken, its limit not recorded", s.holders.size())
      : s.limit > 1 ? fmt::format("semaphore, {} of {} slots taken", s.holders.size(), s.limit)
                    : "lock";
  std::string out =
      fmt::format("prefix '{}': {} ({})\n", printable(o.prefix), held ? "held" : "not held", kind);
  for (const auto& r : s.holders)
    out += fmt::format("  holder: {}, fencing token {}\n", describe(r), r.token);
  for (const auto& r : s.waiters) out += fmt::format("  waiting: {}\n", describe(r));
  return out;
}

// What -watch prints for a status: only what the reader can tell apart (a semaphore's last
// holder gone, and then its limit, is one change in text and two in JSON).
std::string rendered(const Options& o, const PrefixStatus& s) {
  return o.json ? dump_for_terminal(status_json(o, s), -1) + "\n" : status_text(o, s);
}

// Short enough that a reader sees a change at once, long enough that a burst of changes is
// printed as a few states rather than every step of it (whose output grows with its square).
constexpr auto kCoalesce = std::chrono::milliseconds(50);

// -watch's output: each state that reads differently from the last printed, at most one every
// kCoalesce. A change after a quiet spell is printed at once; one that comes sooner is held back,
// replaced by any later one, and printed when the spell ends (the timer), so that a burst ends
// with the state it settled in, and no state is printed twice in a row.
class WatchPrinter {
 public:
  explicit WatchPrinter(const Options& o) : o_(o), timer_(deadline_timer(Deadline::never())) {}

  // Readable when a state held back is due.
  int fd() const { return timer_.get(); }

  void show(const PrefixStatus& s) {
    held_ = s;
    if (Clock::now() >= quiet_until_) return flush();
    if (!armed_) set_deadline_timer(timer_.get(), Deadline(quiet_until_));
    armed_ = true;
  }
  // Prints the state held back, once it is due.
  void flush() {
    if (!held_ || Clock::now() < quiet_until_) return;
    if (armed_) set_deadline_timer(timer_.get(), Deadline::never());
    armed_ = false;
    print(*std::exchange(held_, std::nullopt));
  }
  // The watch ends: what it last heard is printed, due or not.
  void finish() {
    if (held_) print(*held_);
  }

 private:
  void print(const PrefixStatus& s) {
    std::string now = rendered(o_, s);
    if (now == shown_) return;
    shown_ = std::move(now);
    fmt::print("{}", shown_);
    flush_stdout();  // read as it comes, by a program waiting on the other end
    quiet_until_ = Clock::now() + kCoalesce;
  }

  const Options& o_;
  UniqueFd timer_;
  std::string shown_;
  std::optional<PrefixStatus> held_;
  Clock::time_point quiet_until_;
  bool armed_ = false;
};

// One descriptor, readable whenever one of `fds` is: the backends wait on a single one.
UniqueFd any_readable(std::initializer_list<int> fds) {
  UniqueFd epoll(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll) throw sys_error("epoll_create1");
  for (int fd : fds) {
    epoll_event e{.events = EPOLLIN, .data = {.fd = fd}};
    if (epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &e) < 0) throw sys_error("epoll_ctl");
  }
  return epoll;
}

// The status now, then again at every change (one JSON object a line with -json), until a stop
// signal or -timeout, either of which ends it with 0: how a companion follows the holder.
int watch_status(const Options& o, Backend& backend) {
  Signals signals;
  WatchPrinter printer(o);
  UniqueFd woken = any_readable({signals.fd(), printer.fd()});
  Interrupt interrupt{.fd = woken.get(), .keep_going = [&] {
                        printer.flush();
                        return signals.take_stop_signal() == 0;
                      }};
  backend.watch_status(o.prefix,
                       o.timeout.count() > 0 ? Deadline::after(o.timeout) : Deadline::never(),
                       interrupt, [&](const PrefixStatus& s) { printer.show(s); });
  printer.finish();
  return 0;
}

}  // namespace

void flush_stdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    throw sys_error("cannot write to standard output");
}

int show_status(const Options& o) {
  const Registered& backend = carried(o.backend, o.backend_chosen_by);
  if (o.watch) return watch_status(o, *backend.make(*o.backend_config));
  PrefixStatus s = backend.read_status(*o.backend_config, o.prefix, nullptr);
  if (o.json) fmt::print("{}\n", dump_for_terminal(status_json(o, s), 2));
  else fmt::print("{}", status_text(o, s));
  return s.holders.empty() ? kNotHeld : 0;
}

}  // namespace lk
