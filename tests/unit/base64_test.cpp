#include <doctest/doctest.h>

#include "util/base64.hpp"

using lk::base64_decode;
using lk::base64_encode;

TEST_CASE("base64 follows RFC 4648's test vectors both ways") {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (auto [plain, coded] : vectors) {
    CHECK(base64_encode(plain) == coded);
    CHECK(base64_decode(coded) == std::string(plain));
  }
}

TEST_CASE("base64 keeps every byte value") {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  CHECK(base64_decode(base64_encode(all)) == all);
  CHECK(base64_encode("a/b") == "YS9i");
}

TEST_CASE("malformed base64 is refused, not guessed") {
  CHECK_FALSE(base64_decode("Zm9"));       // not a multiple of 4
  CHECK_FALSE(base64_decode("Zm9v!A=="));  // outside the alphabet
  CHECK_FALSE(base64_decode("Z=9v"));      // padding in the middle
  CHECK_FALSE(base64_decode("Zg==Zg=="));  // padding before the end
  CHECK_FALSE(base64_decode("Z==="));
}
