#include "backend/prefix.hpp"

#include "util/error.hpp"
#include "util/printable.hpp"

namespace lk {

std::string validate_prefix(std::string_view prefix) {
  std::string quoted = "'" + printable(prefix) + "'";  // one line, however long or odd
  while (prefix.size() > 1 && prefix.back() == '/') prefix.remove_suffix(1);
  if (prefix.empty() || prefix == "/") throw UsageError("the prefix must not be empty");
  if (prefix.front() == '/')
    throw UsageError("prefix " + quoted + " must be relative (no leading '/')");
  for (unsigned char c : prefix)
    if (c < 0x20 || c == 0x7f)
      throw UsageError("prefix " + quoted + " contains a control character");
  std::string_view rest = prefix;
  while (!rest.empty()) {
    auto slash = rest.find('/');
    auto part = rest.substr(0, slash);
    if (part == "." || part == "..")
      throw UsageError("prefix " + quoted + " must not contain '.' or '..' components");
    if (part.empty()) throw UsageError("prefix " + quoted + " must not contain empty components");
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  return std::string(prefix);
}

}  // namespace lk
