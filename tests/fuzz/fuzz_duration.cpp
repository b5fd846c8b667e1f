// Go durations: parse_go_duration and format_go_duration.
//
// Input: the text to parse. parse_go_duration must return or throw std::invalid_argument worded
// like Go's ("time: ... duration \"<text>\"", one line). What it accepts must agree with a
// reference written from Go's grammar in exact 128-bit arithmetic (within the nanosecond Go's own
// float64 rounding of fractions may cost), and must survive format -> parse unchanged. The first
// 8 bytes, read as any int64 count of nanoseconds, must survive format -> parse too.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#include "util/duration.hpp"
#include "fuzz_check.hpp"

namespace {

using i128 = __int128;
constexpr i128 kTwo63 = static_cast<i128>(1) << 63;

std::string text_of(i128 v) {
  if (v == 0) return "0";
  bool neg = v < 0;
  std::string out;
  for (; v != 0; v /= 10) out.insert(out.begin(), static_cast<char>('0' + (neg ? -(v % 10) : v % 10)));
  return neg ? "-" + out : out;
}

// Go's time.quote: every byte of a non-ASCII or control rune as \xNN, '"' and '\\' escaped.
std::string go_quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c < 0x20 || c >= 0x80) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      if (c == '"' || c == '\\') out += '\\';
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

i128 unit_ns(std::string_view u) {
  if (u == "ns") return 1;
  if (u == "us" || u == "\xc2\xb5s" || u == "\xce\xbcs") return 1'000;
  if (u == "ms") return 1'000'000;
  if (u == "s") return 1'000'000'000;
  if (u == "m") return i128{60} * 1'000'000'000;
  if (u == "h") return i128{3600} * 1'000'000'000;
  return 0;
}

// What Go's ParseDuration makes of `text`: rejected, accepted with a value in [lo, hi] (a
// fraction is rounded through float64, which may land a nanosecond either side of the exact
// value), or too close to a limit to say.
struct Expected {
  enum { reject, accept, unsure } verdict;
  i128 lo = 0, hi = 0;
};

// Where an inexact value stands against `limit` ("must not exceed").
enum class Side { within, beyond, unsure };
Side against(i128 lo, i128 hi, i128 limit) { return hi <= limit ? Side::within : lo > limit ? Side::beyond : Side::unsure; }

Expected reference(std::string_view s) {
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return {Expected::accept, 0, 0};
  if (s.empty()) return {Expected::reject};
  bool unsure = false;
  i128 lo = 0, hi = 0;
  auto digits = [](std::string_view t) {
    std::size_t n = 0;
    while (n < t.size() && t[n] >= '0' && t[n] <= '9') ++n;
    return n;
  };
  while (!s.empty()) {
    std::size_t n = digits(s);
    std::string_view whole = s.substr(0, n);
    s.remove_prefix(n);
    std::string_view frac;
    bool dot = !s.empty() && s[0] == '.';
    if (dot) {
      s.remove_prefix(1);
      n = digits(s);
      frac = s.substr(0, n);
      s.remove_prefix(n);
    }
    if (whole.empty() && frac.empty()) return {Expected::reject};
    std::size_t u = 0;
    while (u < s.size() && s[u] != '.' && !(s[u] >= '0' && s[u] <= '9')) ++u;
    i128 unit = unit_ns(s.substr(0, u));
    if (unit == 0) return {Expected::reject};  // missing or unknown
    s.remove_prefix(u);

    i128 v = 0;
    for (char c : whole) {
      v = v * 10 + (c - '0');
      if (v > kTwo63) return {Expected::reject};  // Go refuses the integer part itself
    }
    v *= unit;
    if (v > kTwo63) return {Expected::reject};
    // The fraction's first 18 digits: the rest are worth less than unit * 1e-18 < 1 ns.
    i128 f = 0, scale = 1;
    for (std::size_t i = 0; i < frac.size() && i < 18; ++i) {
      f = f * 10 + (frac[i] - '0');
      scale *= 10;
    }
    i128 part = f * unit / scale;
    i128 part_lo = f == 0 ? 0 : part > 0 ? part - 1 : 0, part_hi = f == 0 ? 0 : part + 1;
    switch (against(v + part_lo, v + part_hi, kTwo63)) {
      case Side::beyond: return {Expected::reject};
      case Side::unsure: unsure = true; break;
      case Side::within: break;
    }
    lo += v + part_lo;
    hi += v + part_hi;
    switch (against(lo, hi, kTwo63)) {
      case Side::beyond: return {Expected::reject};
      case Side::unsure: unsure = true; break;
      case Side::within: break;
    }
  }
  if (!neg) {
    switch (against(lo, hi, kTwo63 - 1)) {
      case Side::beyond: return {Expected::reject};
      case Side::unsure: unsure = true; break;
      case Side::within: break;
    }
  }
  if (unsure) return {Expected::unsure};
  return neg ? Expected{Expected::accept, -hi, -lo} : Expected{Expected::accept, lo, hi};
}

void check_round_trip(std::chrono::nanoseconds d) {
  std::string text = lk::format_go_duration(d);
  std::chrono::nanoseconds again{};
  try {
    again = lk::parse_go_duration(text);
  } catch (const std::invalid_argument& e) {
    fuzz::fail("format_go_duration's text parses", text + ": " + e.what(), __FILE__, __LINE__);
  }
  FUZZ_CHECK_MSG(again == d, std::to_string(d.count()) + " -> " + text + " -> " + std::to_string(again.count()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const Expected want = reference(text);

  std::optional<std::chrono::nanoseconds> got;
  try {
    got = lk::parse_go_duration(text);
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    FUZZ_CHECK_MSG(message.starts_with("time: "), message);
    FUZZ_CHECK_MSG(message.ends_with("duration " + go_quote(text)), message);
    for (unsigned char c : message) FUZZ_CHECK_MSG(c >= 0x20 && c < 0x80, fuzz::shown(message));
  }

  const std::string shown = fuzz::shown(text);
  if (want.verdict == Expected::reject) FUZZ_CHECK_MSG(!got, shown + " is accepted, Go refuses it");
  if (want.verdict == Expected::accept) {
    FUZZ_CHECK_MSG(got.has_value(), shown + " is refused, Go accepts it");
    FUZZ_CHECK_MSG(got->count() >= want.lo && got->count() <= want.hi,
                   shown + " = " + std::to_string(got->count()) + " ns, Go: " + text_of(want.lo) +
                       " to " + text_of(want.hi));
  }
  if (got) check_round_trip(*got);

  if (size >= sizeof(std::int64_t)) {
    std::int64_t n;
    std::memcpy(&n, data, sizeof n);
    check_round_trip(std::chrono::nanoseconds(n));
  }
  return 0;
}
