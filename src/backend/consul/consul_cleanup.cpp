#include "backend/consul/consul_cleanup.hpp"

#include <fmt/format.h>

#include <thread>

#include "net/http_client.hpp"
#include "util/log.hpp"

namespace lk {

using std::chrono::milliseconds;

bool Cleanup::run(const std::function<void()>& step, std::optional<Deadline> until) {
  Deadline end = until ? Deadline::earlier(*until, until_) : until_;
  milliseconds pause(50);
  std::string last;
  for (;;) {
    std::optional<std::chrono::seconds> retry_after;
    try {
      step();
      return true;
    } catch (const ServerUnavailable& e) {
      last = e.what();
      retry_after = e.retry_after;
    } catch (const NetworkError& e) {
      last = e.what();
    } catch (const std::exception& e) {
      last = e.what();
      break;
    }
    milliseconds wait = retry_after ? std::max<milliseconds>(pause, *retry_after) : pause;
    if (end.left(wait + milliseconds(1)) <= wait) break;  // the next try would come too late
    verbose("{}; trying again in {}ms", last, wait.count());
    std::this_thread::sleep_for(wait);
    pause = std::min(pause * 2, milliseconds(400));
  }
  failure_ = last;
  return false;
}

void Cleanup::report(const std::string& left) {
  if (reported_) return;
  reported_ = true;
  fmt::print(stderr, "lock: could not finish cleaning up ({}); {}\n",
             failure_.value_or("no time left"), left);
}

}  // namespace lk
