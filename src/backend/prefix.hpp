#pragma once
#include <string>
#include <string_view>

namespace lk {

// Checks a prefix given on the command line and returns it without trailing slashes. Refuses
// what could name something outside the prefix's own space: empty prefixes, absolute paths,
// "." and ".." components, and control characters.
std::string validate_prefix(std::string_view prefix);

}  // namespace lk
