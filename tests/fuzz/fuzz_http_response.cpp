// HttpResponse's helpers, which read what a server sent: status_text() and retry_after().
//
// Input: 4 bytes of status, then NUL-separated: the reason phrase, then header names and values
// in turn (names in lower case, as the client stores them; "retry-after" comes up often).
// retry_after() must be present exactly when the header is 1 to 9 ASCII digits, and then be
// their value: never negative, never more than 999999999 s. status_text() is the status number,
// then the reason (or the standard one) after a space.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "fuzz_check.hpp"
#include "net/http_client.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  lk::HttpResponse r;
  std::int32_t status = 0;
  std::memcpy(&status, data, std::min(size, sizeof status));
  r.status = status;
  std::size_t skip = std::min(size, sizeof status);
  auto parts = fuzz::split(std::string_view(reinterpret_cast<const char*>(data) + skip, size - skip), '\0');
  r.reason = parts[0];
  for (std::size_t i = 1; i + 1 < parts.size(); i += 2) r.headers[parts[i]] = parts[i + 1];

  std::optional<long> want;
  if (auto it = r.headers.find("retry-after"); it != r.headers.end()) {
    const std::string& v = it->second;
    if (!v.empty() && v.size() <= 9 && v.find_first_not_of("0123456789") == std::string::npos) want = std::stol(v);
  }
  std::optional<std::chrono::seconds> got = r.retry_after();
  FUZZ_CHECK(got.has_value() == want.has_value());
  if (got) {
    FUZZ_CHECK(got->count() >= 0 && got->count() <= 999'999'999);
    FUZZ_CHECK(got->count() == *want);
  }

  std::string text = r.status_text();
  std::string number = std::to_string(r.status);
  FUZZ_CHECK(text.starts_with(number));
  FUZZ_CHECK(text.size() == number.size() || text[number.size()] == ' ');
  if (!r.reason.empty()) FUZZ_CHECK(text == number + " " + r.reason);
  return 0;
}
