#include "backend/flag.hpp"

#include <cstdlib>
#include <stdexcept>

#include "util/duration.hpp"
#include "util/error.hpp"
#include "util/go_strconv.hpp"

namespace lk {

std::vector<const FlagInfo*> rows_of(std::initializer_list<std::span<const FlagInfo>> lists) {
  std::vector<const FlagInfo*> rows;
  for (auto list : lists)
    for (const FlagInfo& f : list) rows.push_back(&f);
  return rows;
}

const std::string* FlagValues::find(std::string_view flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? nullptr : &it->second;
}

std::string FlagValues::text(std::string_view flag) const {
  const std::string* v = find(flag);
  return v ? *v : "";
}

bool FlagValues::boolean(std::string_view flag, bool otherwise) const {
  const std::string* v = find(flag);
  return v ? *v == "true" : otherwise;
}

std::chrono::nanoseconds FlagValues::duration(std::string_view flag,
                                              std::chrono::nanoseconds otherwise) const {
  const std::string* v = find(flag);
  return v ? duration_value(flag, *v) : otherwise;
}

std::string invalid(std::string_view flag, const std::string& text, const std::string& why) {
  return "invalid value \"" + text + "\" for flag -" + std::string(flag) + ": " + why;
}

std::chrono::nanoseconds duration_value(std::string_view flag, const std::string& text) {
  try {
    return parse_go_duration(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(invalid(flag, text, e.what()));
  }
}

bool env_bool(const char* env, const std::string& text, bool otherwise) {
  if (text.empty()) return otherwise;
  auto b = parse_go_bool(text);
  if (!b)
    throw UsageError(std::string("invalid value \"") + text + "\" for " + env + ": parse error");
  return *b;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace lk
