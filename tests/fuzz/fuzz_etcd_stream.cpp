// A watch or keep-alive stream cut into lines: LineSplitter, and decode_watch_message on each line.
//
// Input: the first byte chooses the line cap (1 + byte % 128; 0xff: kMaxStreamLine); the rest is
// the stream, fed in chunks whose sizes (0 to 255) are taken from the end of the input, so the
// fuzzer chooses where chunks end. While no line passes the cap, the lines returned, each with
// its '\n', followed by what is pending, must be exactly the bytes fed. MalformedReply must come
// exactly from the chunk in which a line first passes the cap, and from no other.
#include <fuzzer/FuzzedDataProvider.h>

#include <optional>
#include <string>
#include <vector>

#include "backend/etcd/etcd_reply.hpp"
#include "fuzz_check.hpp"

namespace {

// The offset in `stream` at which a line first grows past `cap` bytes (without its '\n').
std::optional<std::size_t> first_overflow(std::string_view stream, std::size_t cap) {
  std::size_t start = 0;
  while (true) {
    std::size_t eol = stream.find('\n', start);
    std::size_t end = eol == std::string_view::npos ? stream.size() : eol;
    if (end - start > cap) return start + cap;
    if (eol == std::string_view::npos) return std::nullopt;
    start = eol + 1;
  }
}

void check_line(const std::string& line, std::size_t cap) {
  FUZZ_CHECK(line.size() <= cap && line.find('\n') == std::string::npos);
  try {
    lk::WatchMessage m = lk::decode_watch_message(line);
    FUZZ_CHECK(m.error || m.revision > 0);
  } catch (const lk::MalformedReply& e) {
    FUZZ_CHECK_MSG(fuzz::printable_line(e.what()), fuzz::shown(e.what()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t cap = data[0] == 0xff ? lk::kMaxStreamLine : 1 + data[0] % 128;
  FuzzedDataProvider in(data + 1, size - 1);
  std::vector<std::string> chunks;
  std::string stream;
  while (in.remaining_bytes() > 0) {
    std::size_t n = in.ConsumeIntegralInRange<std::size_t>(0, 255);
    chunks.push_back(in.ConsumeBytesAsString(n));
    stream += chunks.back();
  }

  // Which chunk must throw: the one holding the byte that takes a line past the cap.
  std::optional<std::size_t> overflow = first_overflow(stream, cap), throwing_chunk;
  for (std::size_t i = 0, at = 0; overflow && i < chunks.size(); at += chunks[i++].size()) {
    if (*overflow < at + chunks[i].size()) {
      throwing_chunk = i;
      break;
    }
  }

  lk::LineSplitter splitter(cap);
  std::string joined;  // every line returned, with its '\n'
  std::size_t fed = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    std::vector<std::string> lines;
    try {
      lines = splitter.feed(chunks[i]);
    } catch (const lk::MalformedReply& e) {
      FUZZ_CHECK_MSG(throwing_chunk == i, "chunk " + std::to_string(i) + " threw: " + e.what());
      FUZZ_CHECK_MSG(fuzz::printable_line(e.what()), fuzz::shown(e.what()));
      // Every line before the long one was returned by an earlier chunk, or was in this one.
      FUZZ_CHECK(stream.starts_with(joined));
      return 0;
    }
    FUZZ_CHECK_MSG(throwing_chunk != i, "chunk " + std::to_string(i) + " did not throw");
    for (const std::string& line : lines) {
      check_line(line, cap);
      joined += line;
      joined += '\n';
    }
    // A line comes out with the chunk that completes it, not later.
    fed += chunks[i].size();
    std::size_t last_eol = fed == 0 ? std::string::npos : stream.rfind('\n', fed - 1);
    FUZZ_CHECK(joined.size() == (last_eol == std::string::npos ? 0 : last_eol + 1));
    FUZZ_CHECK(splitter.pending() == fed - joined.size() && splitter.pending() <= cap);
  }
  FUZZ_CHECK(!throwing_chunk);
  FUZZ_CHECK_MSG(joined.size() + splitter.pending() == stream.size() && stream.starts_with(joined),
                 fuzz::shown(joined) + " + " + std::to_string(splitter.pending()) + " pending bytes for " +
                     fuzz::shown(stream));
  FUZZ_CHECK(stream.find('\n', joined.size()) == std::string::npos);  // the pending part holds no line
  return 0;
}
