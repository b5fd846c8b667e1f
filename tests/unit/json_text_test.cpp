#include "util/json_text.hpp"

#include <doctest/doctest.h>

namespace lk {

TEST_CASE("JSON for a terminal: DEL and C1 controls escaped like C0, the value unchanged") {
  nlohmann::json j = {{"name",
                       "a\x1b[2J\x7f\xc2\x9b"
                       "2J\xc2\xa0z"}};
  std::string text = dump_for_terminal(j, -1);
  CHECK(text == R"({"name":"a\u001b[2J\u007f\u009b2J)"
                "\xc2\xa0"
                R"(z"})");
  CHECK(nlohmann::json::parse(text) == j);
}

TEST_CASE("JSON for a terminal: bytes that are not UTF-8 come out as U+FFFD, never raw") {
  nlohmann::json j;
  put_text(j, "name",
           "x\x9b"
           "1m");
  std::string text = dump_for_terminal(j, -1);
  CHECK(text ==
        "{\"name\":\"x\xef\xbf\xbd"
        "1m\",\"name_base64\":\"eJsxbQ==\"}");
}

}  // namespace lk
