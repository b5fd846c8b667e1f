#include <doctest/doctest.h>

#include <string>

#include "net/response_reader.hpp"
#include "net/wake.hpp"

using lk::HttpResponse;
using lk::ResponseReader;

namespace {

// Reads `wire` cut into pieces of `step` bytes; the body as the sink saw it.
std::string read(const std::string& wire, std::size_t step, HttpResponse& head,
                 bool close = false) {
  std::string body;
  ResponseReader reader(
      head,
      [&](std::string_view d) {
        body.append(d);
        return true;
      },
      lk::kMaxReplyBody);
  for (std::size_t at = 0; at < wire.size() && !reader.done(); at += step)
    reader.feed(std::string_view(wire).substr(at, step));
  if (close) reader.end_of_stream();
  CHECK(reader.done());
  return body;
}

}  // namespace

TEST_CASE("a reply is read whole however the connection cuts it") {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Consul-Index: 42\r\n"
      "Content-Length: 11\r\n\r\n{\"ok\":true}";
  for (std::size_t step : {1, 2, 7, 1000}) {
    CAPTURE(step);
    HttpResponse head;
    CHECK(read(wire, step, head) == "{\"ok\":true}");
    CHECK(head.status == 200);
    CHECK(head.reason == "OK");
    CHECK(head.headers.at("x-consul-index") == "42");
  }
}

TEST_CASE("chunks are decoded, and a body may run to the close") {
  HttpResponse head;
  CHECK(
      read("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
           3, head) == "abcde");
  CHECK(read("HTTP/1.0 200 OK\r\n\r\nto the end", 4, head, true) == "to the end");
}

TEST_CASE("a 100 Continue before the reply is passed over") {
  HttpResponse head;
  CHECK(read("HTTP/1.1 100 Continue\r\nX-A: 1\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: "
             "2\r\n\r\nno",
             5, head) == "no");
  CHECK(head.status == 404);
  CHECK_FALSE(head.headers.contains("x-a"));
}

TEST_CASE("what is not HTTP, breaks off, or is too large is an error") {
  HttpResponse head;
  auto sink = [](std::string_view) { return true; };
  {
    ResponseReader r(head, sink, lk::kMaxReplyBody);
    CHECK_THROWS_AS(r.feed("SSH-2.0-OpenSSH\r\n\r\n"), lk::NetworkError);
  }
  {
    ResponseReader r(head, sink, lk::kMaxReplyBody);
    r.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    CHECK_THROWS_AS(r.end_of_stream(), lk::NetworkError);
  }
  {
    ResponseReader r(head, sink, lk::kMaxReplyBody);
    r.feed("HTTP/1.1 100 Continue\r\n\r\n");
    CHECK_THROWS_AS(r.end_of_stream(), lk::NetworkError);  // a 1xx is not the reply
  }
  {
    ResponseReader r(head, sink, 4);
    CHECK_THROWS_AS(r.feed("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), lk::ReplyTooLarge);
  }
  {
    ResponseReader r(head, sink, 4, true);  // a reply to HEAD names a length it does not send
    r.feed("HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n");
    CHECK(r.done());
  }
  {
    ResponseReader r(head, sink, 4);
    CHECK_THROWS_AS(
        r.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n"),
        lk::ReplyTooLarge);
  }
}

TEST_CASE("the sink can stop a stream, and the connection is kept only after a whole reply") {
  HttpResponse head;
  int pieces = 0;
  ResponseReader stream(
      head, [&](std::string_view) { return ++pieces < 2; }, std::nullopt);
  stream.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n");
  CHECK_FALSE(stream.stopped());
  stream.feed("1\r\nb\r\n");
  CHECK(stream.stopped());
  CHECK_FALSE(stream.keep_alive());

  ResponseReader closing(
      head, [](std::string_view) { return true; }, lk::kMaxReplyBody);
  closing.feed("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
  CHECK(closing.done());
  CHECK_FALSE(closing.keep_alive());
  ResponseReader kept(
      head, [](std::string_view) { return true; }, lk::kMaxReplyBody);
  kept.feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  CHECK(kept.keep_alive());
}
