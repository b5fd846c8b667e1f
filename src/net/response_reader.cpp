#include "net/response_reader.hpp"

// GCC 12 sees boost::optional<std::uint64_t> inside Beast's parser as maybe uninitialized once
// inlined under the sanitizers (a known false positive of that warning); the code is Beast's.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <cctype>
#include <limits>

#include "net/wake.hpp"

namespace lk {

namespace http = boost::beast::http;
using boost::beast::error_code;
using boost::beast::string_view;

namespace {

std::string trimmed(string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// 1xx replies come before the real one (101 switches protocols and is the end of HTTP here).
bool informational(long status) { return status >= 100 && status < 200 && status != 101; }

}  // namespace

class ResponseReader::Parser : public http::basic_parser<false> {
 public:
  explicit Parser(ResponseReader& reader) : r_(reader) {
    eager(true);              // bodies go to the sink as far as each read reaches
    header_limit(64 * 1024);  // Consul's headers are a few hundred bytes
    // Counted in take(), whatever way the body is framed. Not boost::none: Beast 1.74 compares a
    // Content-Length with the optional, and any number is more than none.
    body_limit(std::numeric_limits<std::uint64_t>::max());
    skip(reader.head_request_);
  }

 private:
  void on_request_impl(http::verb, string_view, string_view, int, error_code&) override {}
  void on_response_impl(int code, string_view reason, int, error_code& ec) override {
    if (code < 100) {  // Beast takes any three digits; 0 would read as no status at all
      ec = http::error::bad_status;
      return;
    }
    r_.head_.status = code;
    r_.head_.reason = trimmed(reason);
    r_.head_.headers.clear();  // those of a 1xx before it are not this reply's
  }
  void on_field_impl(http::field, string_view name, string_view value, error_code&) override {
    std::string key(name);
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r_.head_.headers[key] = trimmed(value);
  }
  void on_header_impl(error_code& ec) override {
    // Refused before its first byte; a reply with no body (to HEAD, a 204) has nothing to refuse.
    auto length = content_length();
    if (!is_done() && length && r_.body_limit_ && *length > *r_.body_limit_)
      ec = http::error::body_limit;
  }
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(string_view body, error_code& ec) override { return take(body, ec); }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view body, error_code& ec) override {
    return take(body, ec);
  }
  void on_finish_impl(error_code&) override {}

  std::size_t take(string_view body, error_code& ec) {
    received_ += body.size();
    if (r_.body_limit_ && received_ > *r_.body_limit_) {
      ec = http::error::body_limit;
      return 0;
    }
    if (!r_.sink_(std::string_view(body.data(), body.size()))) {
      r_.stopped_ = true;
      ec = http::error::end_of_stream;  // any error ends put(); stopped_ says which
    }
    return body.size();
  }

  ResponseReader& r_;
  std::size_t received_ = 0;
};

ResponseReader::ResponseReader(HttpResponse& head, BodySink sink,
                               std::optional<std::size_t> body_limit, bool head_request)
    : head_(head),
      sink_(std::move(sink)),
      body_limit_(body_limit),
      head_request_(head_request),
      parser_(std::make_unique<Parser>(*this)) {}

ResponseReader::~ResponseReader() = default;

void ResponseReader::fail(const std::string& what) const {
  throw NetworkError("malformed HTTP reply (" + what + ")");
}

void ResponseReader::feed(std::string_view data) {
  if (data.empty() || stopped_) return;
  started_ = true;
  pending_.append(data);
  parse();
}

void ResponseReader::parse() {
  while (!pending_.empty() && !parser_->is_done()) {
    error_code ec;
    std::size_t used =
        parser_->put(boost::asio::const_buffer(pending_.data(), pending_.size()), ec);
    pending_.erase(0, used);
    if (stopped_ || ec == http::error::need_more) return;
    if (ec == http::error::body_limit)
      throw ReplyTooLarge("the reply is larger than " + std::to_string(*body_limit_ >> 20) +
                          " MiB");
    if (ec) fail(ec.message());
    if (parser_->is_done() && informational(head_.status)) {
      parser_ = std::make_unique<Parser>(*this);
    } else if (used == 0) {
      return;
    }
  }
}

void ResponseReader::end_of_stream() {
  if (done()) return;
  if (!parser_->got_some()) fail("the connection closed without a reply");  // or after a 1xx
  error_code ec;
  parser_->put_eof(ec);
  if (ec || !parser_->is_done()) fail("the connection closed before the reply ended");
}

bool ResponseReader::done() const { return parser_->is_done(); }

bool ResponseReader::keep_alive() const {
  return parser_->is_done() && parser_->keep_alive() && pending_.empty();
}

}  // namespace lk
