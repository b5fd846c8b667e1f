#include "util/printable.hpp"

#include <fmt/format.h>

namespace lk {
namespace {

// The length of the well-formed UTF-8 character of two bytes or more that `s` starts with, or 0:
// overlong forms, surrogates, code points past U+10FFFF and sequences cut short are not.
std::size_t multibyte_character(std::string_view s, char32_t& code) {
  auto lead = static_cast<unsigned char>(s[0]);
  std::size_t length;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
    code = lead & 0x1f;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    code = lead & 0x0f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;
  }
  if (s.size() < length) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    auto next = static_cast<unsigned char>(s[i]);
    if ((next & 0xc0) != 0x80) return 0;
    code = code << 6 | (next & 0x3f);
  }
  static constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kSmallest[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return 0;
  return length;
}

// As multibyte_character, but the C1 controls (U+0080 to U+009F) count as malformed too: some
// terminals obey them as they do ESC.
std::size_t printable_character(std::string_view s) {
  char32_t code = 0;
  std::size_t length = multibyte_character(s, code);
  return code < 0xa0 ? 0 : length;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    std::string piece;
    auto c = static_cast<unsigned char>(text[i]);
    std::size_t used = 1;
    switch (c) {
      case '\n': piece = "\\n"; break;
      case '\r': piece = "\\r"; break;
      case '\t': piece = "\\t"; break;
      case '\\': piece = "\\\\"; break;
      default:
        if (c >= 0x20 && c < 0x7f) {
          piece = static_cast<char>(c);
        } else if (c >= 0x80 && (used = printable_character(text.substr(i))) > 0) {
          piece = text.substr(i, used);
        } else {
          used = 1;
          piece = fmt::format("\\x{:02x}", c);
        }
    }
    if (out.size() + piece.size() > max) return out + "...";
    out += piece;
    i += used;
  }
  return out;
}

bool valid_utf8(std::string_view text) {
  char32_t code = 0;
  for (std::size_t i = 0, used; i < text.size(); i += used) {
    bool ascii = static_cast<unsigned char>(text[i]) < 0x80;
    if ((used = ascii ? 1 : multibyte_character(text.substr(i), code)) == 0) return false;
  }
  return true;
}

}  // namespace lk
