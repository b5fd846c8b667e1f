#include "util/printable.hpp"

#include <fmt/format.h>

namespace lk {

std::string printable(std::string_view text, std::size_t max) {
  std::string out;
  for (unsigned char c : text) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c >= 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace lk
