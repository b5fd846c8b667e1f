#pragma once
// Reads one HTTP/1.1 reply out of the bytes a connection delivers, however they are cut: status,
// reason and headers into an HttpResponse, the body (chunks decoded) to a sink as it arrives.
// The parsing itself is Boost.Beast's.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "net/http_response.hpp"

namespace lk {

class ResponseReader {
 public:
  // Gets the body as it comes; false stops the reading (the connection is then of no more use).
  using BodySink = std::function<bool(std::string_view)>;

  // `body_limit`: past it, feed() throws ReplyTooLarge. A reply to HEAD has no body, whatever
  // its headers say.
  ResponseReader(HttpResponse& head, BodySink sink, std::optional<std::size_t> body_limit,
                 bool head_request = false);
  ~ResponseReader();
  ResponseReader(const ResponseReader&) = delete;
  ResponseReader& operator=(const ResponseReader&) = delete;

  // Takes the next bytes from the connection. Throws NetworkError when they are not HTTP,
  // ReplyTooLarge past the body limit.
  void feed(std::string_view data);
  // The server closed the connection: that ends a body that runs to the close, and is an error
  // (NetworkError) anywhere else.
  void end_of_stream();

  bool started() const { return started_; }  // some of the reply came
  bool done() const;
  bool stopped() const { return stopped_; }  // the sink said to stop
  // Whether the connection may carry the next request: the server did not ask to close it and
  // sent nothing past the reply's end.
  bool keep_alive() const;

 private:
  class Parser;
  void parse();
  [[noreturn]] void fail(const std::string& what) const;

  HttpResponse& head_;
  BodySink sink_;
  std::optional<std::size_t> body_limit_;
  bool head_request_;
  std::unique_ptr<Parser> parser_;
  std::string pending_;  // bytes the parser has not taken yet (a header split across reads)
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace lk
