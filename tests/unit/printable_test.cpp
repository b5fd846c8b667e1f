#include "util/printable.hpp"

#include <doctest/doctest.h>

#include <string>

using lk::printable;

TEST_CASE("text in a message: one line, escaped, cut short") {
  CHECK(printable("No cluster leader") == "No cluster leader");
  CHECK(printable("a\nb\r\t\x1b[31m\\") == "a\\nb\\r\\t\\x1b[31m\\\\");
  CHECK(printable("caf\xc3\xa9") == "caf\\xc3\\xa9");
  CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(printable(std::string(1000, 'x')) == std::string(200, 'x') + "...");
  CHECK(printable(std::string(200, 'x')) == std::string(200, 'x'));
  CHECK(printable("abcdef", 3) == "abc...");
}
