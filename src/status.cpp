#include "status.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "backend/make_backend.hpp"
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
  return j;
}

// Records are written by other processes, names by users: nothing in them may reach the
// terminal unescaped.
std::string describe(const HolderRecord& r) {
  return r.name.empty() ? r.who() : fmt::format("{}, name '{}'", r.who(), printable(r.name));
}

}  // namespace

int show_status(const Options& o) {
  PrefixStatus s = make_backend(o)->status(o.prefix, nullptr);
  bool held = !s.holders.empty();
  if (o.json) {
    nlohmann::json out = {{"backend", o.backend},
                          {"limit", s.limit_unknown ? nlohmann::json() : nlohmann::json(s.limit)},
                          {"held", held},           {"holders", nlohmann::json::array()},
                          {"waiters", nlohmann::json::array()}};
    put_text(out, "prefix", o.prefix);
    for (const auto& r : s.holders) out["holders"].push_back(as_json(r));
    for (const auto& r : s.waiters) out["waiters"].push_back(as_json(r));
    fmt::print("{}\n", dump_for_terminal(out, 2));
    return held ? 0 : kNotHeld;
  }
  if (!held && s.waiters.empty()) {
    fmt::print("prefix '{}': not held\n", printable(o.prefix));
    return kNotHeld;
  }
  std::string kind = s.limit_unknown ? fmt::format("semaphore, {} slots taken, its limit not recorded", s.holders.size())
                     : s.limit > 1   ? fmt::format("semaphore, {} of {} slots taken", s.holders.size(), s.limit)
                                     : "lock";
  fmt::print("prefix '{}': {} ({})\n", printable(o.prefix), held ? "held" : "not held", kind);
  for (const auto& r : s.holders) fmt::print("  holder: {}, fencing token {}\n", describe(r), r.token);
  for (const auto& r : s.waiters) fmt::print("  waiting: {}\n", describe(r));
  return held ? 0 : kNotHeld;
}

}  // namespace lk
