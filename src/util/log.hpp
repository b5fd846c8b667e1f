#pragma once
// -verbose output: what lock is doing and why, on stderr, with a timestamp. Silent otherwise.
#include <fmt/format.h>

#include <string_view>

namespace lk {

void set_verbose(bool on);
bool verbose_enabled();
void write_log_line(std::string_view message);

template <class... Args>
void verbose(fmt::format_string<Args...> format, Args&&... args) {
  if (verbose_enabled()) write_log_line(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace lk
