#include "net/http_response.hpp"

#include <string_view>

#include "util/printable.hpp"

namespace lk {
namespace {

// For servers that leave the reason phrase out.
std::string_view standard_reason(long status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
  }
}

}  // namespace

std::string HttpResponse::status_text() const {
  std::string_view why = reason.empty() ? standard_reason(status) : std::string_view(reason);
  // The reason phrase is the server's: HTTP allows bytes 0x80 to 0xff in it, C1 controls included.
  return why.empty() ? std::to_string(status) : std::to_string(status) + " " + printable(why, 80);
}

std::optional<std::chrono::seconds> HttpResponse::retry_after() const {
  auto it = headers.find("retry-after");
  if (it == headers.end() || it->second.empty() || it->second.size() > 9) return std::nullopt;
  long seconds = 0;
  for (char c : it->second) {
    if (c < '0' || c > '9') return std::nullopt;
    seconds = seconds * 10 + (c - '0');
  }
  return std::chrono::seconds(seconds);
}

}  // namespace lk
