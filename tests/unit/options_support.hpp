#pragma once
// What the tests of parse_options share: a clean environment, and the config of the backend
// chosen, read as its own type.
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/options.hpp"
#include "util/error.hpp"

namespace lk::test {

using Args = std::vector<std::string>;

// A Scope clears every variable parse_options reads for one test case and puts back what the
// process had when it ends, so the developer's own environment cannot leak into a test nor one
// case into the next.
class EnvScope {
 public:
  EnvScope() {
    for (const std::string& name : option_variables()) {
      const char* value = std::getenv(name.c_str());
      saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
      unsetenv(name.c_str());
    }
  }
  ~EnvScope() {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

  void set(const char* name, const char* value) { setenv(name, value, 1); }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// The UsageError message for `args`, or "" when they parse.
inline std::string error_of(const Args& args) {
  try {
    parse_options(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// Parses `flags` followed by a valid prefix and child.
inline Options with(Args flags) {
  flags.insert(flags.end(), {"p", "cmd"});
  return parse_options(flags);
}

// The chosen backend's configuration, as its own type: `Config` must be the chosen one's.
template <class Config>
const Config& config_of(const Options& o) {
  auto* config = dynamic_cast<const Config*>(o.backend_config.get());
  REQUIRE(config);
  return *config;
}

// The configuration that `args` give `backend`, which they must choose.
template <class Config>
Config config_with(const Args& args, std::string_view backend) {
  Options o = parse_options(args);
  REQUIRE(o.backend == backend);
  return config_of<Config>(o);
}

}  // namespace lk::test
