#include "backend/lease/follow_prefix.hpp"

#include <fmt/format.h>

#include <optional>

#include "backend/lease/backoff.hpp"
#include "util/deadline_timer.hpp"
#include "util/log.hpp"
#include "util/printable.hpp"

namespace lk {

void follow_prefix(const std::string& prefix, Deadline deadline, const Interrupt& interrupt,
                   const LeaseTiming& timing, const std::function<Look(const Wake&)>& look) {
  UniqueFd timer = deadline_timer(deadline);
  bool over = false;
  auto keep_going = [&] {
    over = over || deadline.passed() || !interrupt.keep_going_if_woken();
    return !over;
  };
  Wake wake{{timer.get(), interrupt.fd}, keep_going};
  Backoff backoff(std::chrono::milliseconds(50),
                  std::chrono::duration_cast<std::chrono::milliseconds>(timing.retry_every));
  // Since the first failure in a row: a look that fails may have waited long on a live server
  // (a quiet watch, a blocking query), so the silence is counted from when it failed.
  std::optional<Clock::time_point> failing_since;
  while (keep_going()) {
    auto started = Clock::now();
    std::chrono::milliseconds pause;
    try {
      Look news = look(wake);
      failing_since.reset();
      if (news == Look::changed || Clock::now() - started >= backoff.cap()) {
        backoff.reset();
        continue;
      }
      pause = backoff.next();
    } catch (const Cancelled&) {
      if (!keep_going()) return;
      throw;
    } catch (const NetworkError& e) {
      if (!failing_since) failing_since = Clock::now();
      auto silent = Clock::now() - *failing_since;
      if (silent >= timing.stop_after())
        throw Error(fmt::format("stopped watching prefix '{}': no answer for {} ms, as long as a hold "
                                "keeps its lease without one (-session-ttl, -kill-after): {}",
                                printable(prefix),
                                std::chrono::duration_cast<std::chrono::milliseconds>(silent).count(), e.what()));
      // The last attempt goes out as the budget ends (rounded up, so that it is spent by then).
      pause = std::max(backoff.next(), std::chrono::milliseconds(retry_after_of(e).value_or(std::chrono::seconds(0))));
      pause = std::min(pause, std::chrono::ceil<std::chrono::milliseconds>(*failing_since + timing.stop_after() - Clock::now()));
      verbose("watching prefix '{}' failed ({}); again in {}ms", printable(prefix), e.what(), pause.count());
    }
    if (!pause_unless_woken(pause, &wake)) return;
  }
}

}  // namespace lk
