#pragma once
// Text a server or a user chose, made fit for a one-line message: control characters (C0, DEL
// and C1) and bytes that are not well-formed UTF-8 escaped (\n, \x1b, \xff), backslashes doubled
// so that the escapes stay unambiguous, and cut to about `max` bytes with "..." (never inside a
// character) so that a huge reply or argument cannot flood the terminal.
#include <cstddef>
#include <string>
#include <string_view>

namespace lk {

std::string printable(std::string_view text, std::size_t max = 200);

// Whether `text` is well-formed UTF-8 (RFC 3629), as JSON text must be; controls are allowed.
bool valid_utf8(std::string_view text);

}  // namespace lk
