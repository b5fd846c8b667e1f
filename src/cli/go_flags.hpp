#pragma once
// Go's flag syntax, which `consul lock` users type: -flag and --flag alike, -flag=value or
// -flag value, booleans only as -flag or -flag=<bool>, and parsing stops at the first argument
// that is not a flag (or after "--"), so everything from the prefix on is left untouched.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/go_strconv.hpp"

namespace lk {

enum class FlagKind { boolean, value };

struct GoArgs {
  std::vector<std::pair<std::string, std::string>>
      flags;                      // name, value ("true"/"false" for booleans)
  std::vector<std::string> rest;  // prefix and child
};

// `kind_of` names the flags that exist. Throws UsageError in Go's wording for unknown flags,
// missing values, bad booleans and bad syntax. Like Go, stops at -h or -help, the last flag then.
GoArgs split_go_flags(const std::vector<std::string>& args,
                      const std::function<std::optional<FlagKind>(std::string_view)>& kind_of);

}  // namespace lk
