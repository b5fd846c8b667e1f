#include "util/json_text.hpp"

#include <fmt/format.h>

#include "util/base64.hpp"
#include "util/printable.hpp"

namespace lk {

void put_text(nlohmann::json& object, const std::string& key, const std::string& text) {
  object[key] = text;
  if (!valid_utf8(text)) object[key + "_base64"] = base64_encode(text);
}

std::string dump_for_terminal(const nlohmann::json& value, int indent) {
  // The dump is valid UTF-8 (error_handler_t::replace), and these bytes occur only inside
  // strings: 0x7f is DEL itself, 0xc2 followed by 0x80 to 0x9f the C1 controls.
  std::string text = value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (byte == 0x7f) {
      out += "\\u007f";
    } else if (byte == 0xc2 && next >= 0x80 && next <= 0x9f) {
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace lk
