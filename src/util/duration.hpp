#pragma once
#include <chrono>
#include <string>
#include <string_view>

namespace lk {

// Parses Go duration syntax ("300ms", "-1.5h", "2h45m", "1us", "1µs", "0"). Throws
// std::invalid_argument with a message worded like Go's (e.g. `time: missing unit in duration "1"`,
// `time: invalid duration "x"`, `time: unknown unit "d" in duration "1d"`) on any input Go rejects,
// including overflow.
std::chrono::nanoseconds parse_go_duration(std::string_view text);

// Formats like Go's Duration.String(): "1h2m3.5s", "300ms", "1.5µs", "0s".
std::string format_go_duration(std::chrono::nanoseconds d);

}  // namespace lk
