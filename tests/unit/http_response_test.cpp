#include <doctest/doctest.h>

#include "net/http_client.hpp"

using lk::HttpResponse;

TEST_CASE("a status reads as the server put it, or as the standard names it") {
  HttpResponse r;
  r.status = 503;
  CHECK(r.status_text() == "503 Service Unavailable");  // a server may leave the reason out
  r.reason = std::string("No Leader");
  CHECK(r.status_text() == "503 No Leader");
  r = {};
  r.status = 599;
  CHECK(r.status_text() == "599");
  r.reason =
      "No\x1b]0;x\x07 \x9b"
      "2J";  // the server's bytes reach no terminal raw
  CHECK(r.status_text() == "599 No\\x1b]0;x\\x07 \\x9b2J");
}

TEST_CASE("Retry-After is honoured in seconds only, and only when it is a plain number") {
  HttpResponse r;
  CHECK_FALSE(r.retry_after());
  r.headers = {{"retry-after", "7"}};
  CHECK(r.retry_after() == std::chrono::seconds(7));
  for (const char* bad :
       {"", "-1", "1.5", "Wed, 21 Oct 2026 07:28:00 GMT", "99999999999999999999"}) {
    CAPTURE(bad);
    r.headers = {{"retry-after", bad}};
    CHECK_FALSE(r.retry_after());
  }
}
