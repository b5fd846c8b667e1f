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

namespace lk {

enum class FlagKind { boolean, value };

struct GoArgs {
  std::vector<std::pair<std::string, std::string>> flags;  // name, value ("true"/"false" for booleans)
  std::vector<std::string> rest;                          // prefix and child
};

// `kind_of` names the flags that exist. Throws UsageError in Go's wording for unknown flags,
// missing values, bad booleans and bad syntax. Like Go, stops at -h or -help, the last flag then.
GoArgs split_go_flags(const std::vector<std::string>& args,
                      const std::function<std::optional<FlagKind>(std::string_view)>& kind_of);

// strconv.ParseBool: 1 t T TRUE true True, 0 f F FALSE false False.
std::optional<bool> parse_go_bool(std::string_view text);

// strconv.ParseInt(text, 0, 64), as Go's flag package reads integers: an optional sign, then
// decimal, 0x/0o/0b or a leading 0 (octal), underscores between digits. Throws
// std::invalid_argument ("parse error") or std::out_of_range ("value out of range").
long long parse_go_int(std::string_view text);

}  // namespace lk
