#include "util/printable.hpp"

#include <doctest/doctest.h>

#include <string>

using lk::printable;

TEST_CASE("text in a message: one line, control characters escaped") {
  CHECK(printable("No cluster leader") == "No cluster leader");
  CHECK(printable("a\nb\r\t\x1b[31m\\") == "a\\nb\\r\\t\\x1b[31m\\\\");
  CHECK(printable(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(printable("\x7f") == "\\x7f");
  CHECK(printable("\xc2\x9b"
                  "2J") == "\\xc2\\x9b2J");  // C1 CSI: a terminal may obey it
}

TEST_CASE("well-formed UTF-8 stays as it is, anything else is escaped byte by byte") {
  CHECK(printable("caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x94\x92") ==
        "caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x94\x92");
  CHECK(printable("\xff") == "\\xff");
  CHECK(printable("caf\xc3") == "caf\\xc3");                       // cut short
  CHECK(printable("\xc3(") == "\\xc3(");                           // not a continuation byte
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");                    // overlong '/'
  CHECK(printable("\xe0\x80\xaf") == "\\xe0\\x80\\xaf");           // overlong, three bytes
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");           // a surrogate
  CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
}

TEST_CASE("long text is cut at about max bytes, never inside a character or an escape") {
  CHECK(printable(std::string(1000, 'x')) == std::string(200, 'x') + "...");
  CHECK(printable(std::string(200, 'x')) == std::string(200, 'x'));
  CHECK(printable("abcdef", 3) == "abc...");
  CHECK(printable("ab\xc3\xa9", 3) == "ab...");
  CHECK(printable("ab\n", 3) == "ab...");
}
