// The HTTP reply reader (ResponseReader, on Boost.Beast's parser) and what the backends read from
// its result, status_text() and retry_after().
//
// Input: one byte of options, then the bytes a server sent. The option byte's low 6 bits are the
// size of the pieces the connection delivers them in (0: all at once), bit 6 makes the body limit
// 64 bytes instead of kMaxReplyBody, bit 7 has the server close the connection after the bytes.
//
// Invariants: the reader throws nothing but NetworkError (not HTTP, or cut off) and ReplyTooLarge;
// the sink never gets more than the limit; a reply read whole is read the same in pieces (status,
// reason, headers, body), and bytes refused one way are never taken for a reply the other; a
// connection is kept only after a whole reply; a whole reply has a 3-digit status and lower-case
// header names; retry_after() is there exactly when the header is 1 to 9 ASCII digits, and is
// then their value; status_text() is the status number, then after a space the reason made
// printable (or the standard one).
#include <cctype>
#include <chrono>
#include <optional>
#include <string>

#include "fuzz_check.hpp"
#include "net/response_reader.hpp"
#include "net/wake.hpp"
#include "util/printable.hpp"

namespace {

struct Outcome {
  lk::HttpResponse head;
  std::string body;
  std::string error;  // "network", "too large", or empty
  bool done = false;
  bool keep_alive = false;
};

Outcome read(std::string_view wire, std::size_t step, std::size_t limit, bool close) {
  Outcome o;
  lk::ResponseReader reader(o.head, [&](std::string_view d) { o.body.append(d); return true; }, limit);
  try {
    for (std::size_t at = 0; at < wire.size() && !reader.done(); at += step)
      reader.feed(wire.substr(at, step));
    if (close) reader.end_of_stream();
  } catch (const lk::ReplyTooLarge&) {
    o.error = "too large";
  } catch (const lk::NetworkError&) {
    o.error = "network";
  }
  FUZZ_CHECK(o.body.size() <= limit);
  o.done = reader.done();
  o.keep_alive = reader.keep_alive();
  return o;
}

void check_helpers(const lk::HttpResponse& r) {
  std::optional<long> want;
  if (auto it = r.headers.find("retry-after"); it != r.headers.end()) {
    const std::string& v = it->second;
    if (!v.empty() && v.size() <= 9 && v.find_first_not_of("0123456789") == std::string::npos) want = std::stol(v);
  }
  std::optional<std::chrono::seconds> got = r.retry_after();
  FUZZ_CHECK(got.has_value() == want.has_value());
  if (got) FUZZ_CHECK(got->count() == *want);

  std::string text = r.status_text();
  std::string number = std::to_string(r.status);
  FUZZ_CHECK(text.starts_with(number));
  FUZZ_CHECK(text.size() == number.size() || text[number.size()] == ' ');
  // The reason is the server's: it reaches a message only made printable.
  if (!r.reason.empty()) FUZZ_CHECK(text == number + " " + lk::printable(r.reason, 80));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::size_t step = data[0] & 0x3f;
  std::size_t limit = (data[0] & 0x40) ? 64 : lk::kMaxReplyBody;
  bool close = (data[0] & 0x80) != 0;
  std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);

  Outcome whole = read(wire, wire.size() + 1, limit, close);
  Outcome cut = read(wire, step == 0 ? wire.size() + 1 : step, limit, close);
  // A reply read whole is the same reply in pieces. Where the bytes are not one, Beast may see
  // it sooner or later depending on the cuts (or, when they stop early, not at all), and may name
  // it differently (too large, or malformed), but it never takes them for a reply one way and
  // refuses them the other.
  bool whole_ok = whole.done && whole.error.empty(), cut_ok = cut.done && cut.error.empty();
  FUZZ_CHECK_MSG(whole_ok == cut_ok || (whole.error.empty() && !whole.done) ||
                     (cut.error.empty() && !cut.done),
                 whole.error + " / " + cut.error);
  if (whole_ok && cut_ok) {
    FUZZ_CHECK(whole.body == cut.body);
    FUZZ_CHECK(whole.head.status == cut.head.status && whole.head.reason == cut.head.reason);
    FUZZ_CHECK(whole.head.headers == cut.head.headers);
  }
  FUZZ_CHECK(!whole.keep_alive || whole.done);
  if (whole.done && whole.error.empty()) {
    FUZZ_CHECK(whole.head.status >= 100 && whole.head.status <= 999);
    for (const auto& [name, value] : whole.head.headers)
      for (char c : name) FUZZ_CHECK(!std::isupper(static_cast<unsigned char>(c)));
  }
  check_helpers(whole.head);
  return 0;
}
