#pragma once
// Text a user or another machine chose (a prefix, a -name, a host name) is bytes, while JSON text
// must be UTF-8. Text that is not is written as it always was, U+FFFD in place of the offending
// bytes (the dump's error_handler_t::replace), for people and for readers that know no more; its
// exact bytes go beside it in "<key>_base64", so that nothing is lost on the way back.
#include <nlohmann/json.hpp>
#include <string>

#include "util/base64.hpp"
#include "util/printable.hpp"

namespace lk {

inline void put_text(nlohmann::json& object, const std::string& key, const std::string& text) {
  object[key] = text;
  if (!valid_utf8(text)) object[key + "_base64"] = base64_encode(text);
}

}  // namespace lk
