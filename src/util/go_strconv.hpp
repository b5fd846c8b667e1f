#pragma once
// Go's strconv, as Go's flag package reads flag values: booleans and integers (durations are
// duration.hpp's).
#include <optional>
#include <string_view>

namespace lk {

// strconv.ParseBool: 1 t T TRUE true True, 0 f F FALSE false False.
std::optional<bool> parse_go_bool(std::string_view text);

// strconv.ParseInt(text, 0, 64), as Go's flag package reads integers: an optional sign, then
// decimal, 0x/0o/0b or a leading 0 (octal), underscores between digits. Throws
// std::invalid_argument ("parse error") or std::out_of_range ("value out of range").
long long parse_go_int(std::string_view text);

}  // namespace lk
