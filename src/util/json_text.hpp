#pragma once
// Text a user or another machine chose (a prefix, a -name, a host name) is bytes, while JSON text
// must be UTF-8. Text that is not is written as it always was, U+FFFD in place of the offending
// bytes (the dump's error_handler_t::replace), for people and for readers that know no more; its
// exact bytes go beside it in "<key>_base64", so that nothing is lost on the way back.
#include <nlohmann/json.hpp>
#include <string>

namespace lk {

void put_text(nlohmann::json& object, const std::string& key, const std::string& text);

// The JSON text of `value` for a terminal or a log. JSON lets DEL and the C1 controls (U+0080 to
// U+009F, which some terminals obey as they do ESC [) through raw: they are written as \u escapes
// too, which every reader decodes to the same value.
std::string dump_for_terminal(const nlohmann::json& value, int indent);

}  // namespace lk
