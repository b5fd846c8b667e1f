#include "backend/lease/follow_prefix.hpp"

#include <fmt/format.h>

#include "backend/lease/backoff.hpp"
#include "util/deadline_timer.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {
namespace {

using std::chrono::milliseconds;

// How long the server has gone unheard, kept as a hold keeps its lease: each answer counts as a
// renewal of RenewalSchedule, and a probe goes out whenever a renewal would fall due.
class Silence {
 public:
  Silence(const LeaseTiming& timing, const Probe& probe, const Wake& probe_wake)
      : schedule_(timing, Clock::now(), LeaseTiming::Phase::holding),
        probe_(probe),
        probe_wake_(probe_wake),
        timer_(deadline_timer(Deadline::never())) {
    arm();
  }

  // Readable when a probe falls due, or the budget ends.
  int fd() const { return timer_.get(); }
  void heard() { schedule_.succeeded(Clock::now()); }
  void failed(const Error& e) { why_ = e.what(); }

  // Whether the budget is spent without an answer; first probes the server if that is due.
  bool over() {
    if (over_ || Clock::now() < armed_for_) return over_;
    if (Clock::now() >= schedule_.next_attempt() && Clock::now() < schedule_.stop_at()) ask();
    over_ = Clock::now() >= schedule_.stop_at();
    if (!over_) arm();
    return over_;
  }
  // Until the budget ends, rounded up so that it has ended then.
  milliseconds left() const {
    return std::max(milliseconds(0),
                    std::chrono::ceil<milliseconds>(schedule_.stop_at() - Clock::now()));
  }

  Error error(const std::string& prefix) const {
    auto silent =
        std::chrono::duration_cast<milliseconds>(Clock::now() - schedule_.last_ack_send());
    return Error(fmt::format(
        "stopped watching prefix '{}': no answer for {} ms, as long as a hold keeps its "
        "lease without one (-session-ttl, -kill-after){}",
        printable(prefix), silent.count(), why_.empty() ? "" : ": " + why_));
  }

 private:
  void arm() {
    armed_for_ = std::min(schedule_.next_attempt(), schedule_.stop_at());
    set_deadline_timer(timer_.get(), Deadline(armed_for_));
  }

  void ask() {
    auto sent = Clock::now();
    try {
      probe_(schedule_.attempt_timeout(sent), probe_wake_);
      schedule_.succeeded(sent);
    } catch (const Cancelled&) {
      // asked to stop: the wait that called us hears it from the wake
    } catch (const Error& e) {
      // Anything but an answer counts as none, as a renewal's does; thrown from here it would
      // cross the wait of the look under way.
      failed(e);
      auto* network = dynamic_cast<const NetworkError*>(&e);
      schedule_.failed(sent, Clock::now(), network ? retry_after_of(*network) : std::nullopt);
      verbose("no answer to a probe of the server ({}); again in {}ms", e.what(),
              std::chrono::duration_cast<milliseconds>(schedule_.next_attempt() - Clock::now())
                  .count());
    }
  }

  RenewalSchedule schedule_;
  const Probe& probe_;
  const Wake& probe_wake_;
  UniqueFd timer_;
  Clock::time_point armed_for_;
  std::string why_;  // the last failure, for the message
  bool over_ = false;
};

}  // namespace

void follow_prefix(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                   const LeaseTiming& timing, const Probe& probe,
                   const std::function<Look(const Wake&, const Heard&)>& look) {
  UniqueFd timer = deadline_timer(deadline);
  bool stopped = false;
  auto asked_to_stop = [&] {
    stopped = stopped || deadline.passed() || !interrupt.keep_going_if_woken();
    return stopped;
  };
  Wake probe_wake{{timer.get(), interrupt.fd}, [&] { return !asked_to_stop(); }};
  Silence silence(timing, probe, probe_wake);
  auto keep_going = [&] { return !asked_to_stop() && !silence.over(); };
  Wake wake{{timer.get(), interrupt.fd, silence.fd()}, keep_going};
  Heard heard = [&] { silence.heard(); };
  Backoff backoff(std::chrono::milliseconds(50),
                  std::chrono::duration_cast<milliseconds>(timing.retry_every));
  while (keep_going()) {
    auto started = Clock::now();
    milliseconds pause;
    try {
      Look news = look(wake, heard);
      if (news == Look::changed || Clock::now() - started >= backoff.cap()) {
        backoff.reset();
        continue;
      }
      pause = backoff.next();
    } catch (const Cancelled&) {
      if (keep_going()) throw;
      break;
    } catch (const NetworkError& e) {
      silence.failed(e);
      pause = std::max(backoff.next(),
                       milliseconds(retry_after_of(e).value_or(std::chrono::seconds(0))));
      pause = std::min(pause, silence.left());
      verbose("watching prefix '{}' failed ({}); again in {}ms", printable(prefix), e.what(),
              pause.count());
    }
    if (!pause_unless_woken(pause, &wake)) break;
  }
  if (!stopped) throw silence.error(prefix);
}

}  // namespace lk
