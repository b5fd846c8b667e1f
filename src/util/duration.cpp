#include "util/duration.hpp"

#include <cstdint>
#include <stdexcept>

// A port of ParseDuration and Duration.String from Go's src/time (format.go, time.go).
// Go accumulates the magnitude in a uint64 so that -2^63 ns is reachable; so do we.

namespace lk {
namespace {

using u64 = std::uint64_t;
constexpr u64 kMaxMagnitude = u64{1} << 63;  // |INT64_MIN|

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Go's time.quote. It hex-escapes every byte of each non-ASCII or control rune; as UTF-8 never
// puts an ASCII byte inside a multi-byte sequence, escaping byte by byte gives the same text.
std::string quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c >= 0x80 || c < 0x20) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else {
      if (c == '"' || c == '\\') out += '\\';
      out += static_cast<char>(c);
    }
  }
  return out + '"';
}

[[noreturn]] void invalid(std::string_view orig) {
  throw std::invalid_argument("time: invalid duration " + quote(orig));
}

u64 unit_in_ns(std::string_view u) {
  if (u == "ns") return 1;
  if (u == "us" || u == "\u00B5s" || u == "\u03BCs") return 1'000;
  if (u == "ms") return 1'000'000;
  if (u == "s") return 1'000'000'000;
  if (u == "m") return 60'000'000'000;
  if (u == "h") return 3'600'000'000'000;
  return 0;
}

// Go's leadingInt: the digits at the start of `s`, taken off it; Go refuses the number outright
// once it exceeds 2^63.
u64 leading_int(std::string_view& s, std::string_view text) {
  u64 v = 0;
  std::size_t i = 0;
  for (; i < s.size() && is_digit(s[i]); ++i) {
    if (v > kMaxMagnitude / 10) invalid(text);
    v = v * 10 + static_cast<u64>(s[i] - '0');
    if (v > kMaxMagnitude) invalid(text);
  }
  s.remove_prefix(i);
  return v;
}

struct Fraction {
  u64 value = 0;
  double scale = 1;
  bool digits = false;  // whether there were any
};

// Go's leadingFraction: the digits at the start of `s`, taken off it. Digits past what fits just
// stop adding precision, so "0.100000000000000000000h" is fine.
Fraction leading_fraction(std::string_view& s) {
  Fraction f;
  bool saturated = false;
  std::size_t i = 0;
  for (; i < s.size() && is_digit(s[i]); ++i) {
    if (saturated) continue;
    if (f.value > (kMaxMagnitude - 1) / 10 ||
        f.value * 10 + static_cast<u64>(s[i] - '0') > kMaxMagnitude) {
      saturated = true;
      continue;
    }
    f.value = f.value * 10 + static_cast<u64>(s[i] - '0');
    f.scale *= 10;
  }
  f.digits = i > 0;
  s.remove_prefix(i);
  return f;
}

// Go's fmtFrac: the low `prec` digits of v as ".ddd" with trailing zeros (and a bare dot) dropped.
std::string fraction(u64 v, int prec) {
  std::string digits;
  for (int i = 0; i < prec; ++i, v /= 10) {
    digits.insert(digits.begin(), static_cast<char>('0' + v % 10));
  }
  digits.erase(digits.find_last_not_of('0') + 1);  // all zeros: npos + 1 == 0 empties it
  return digits.empty() ? digits : "." + digits;
}

}  // namespace

std::chrono::nanoseconds parse_go_duration(std::string_view text) {
  std::string_view s = text;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return std::chrono::nanoseconds{0};
  if (s.empty()) invalid(text);

  u64 total = 0;
  while (!s.empty()) {
    if (!(s[0] == '.' || is_digit(s[0]))) invalid(text);

    std::size_t digits = s.size();
    u64 v = leading_int(s, text);
    const bool pre = s.size() < digits;
    Fraction f;
    if (!s.empty() && s[0] == '.') {
      s.remove_prefix(1);
      f = leading_fraction(s);
    }
    if (!pre && !f.digits) invalid(text);  // ".s", "-.", "."

    std::size_t i = 0;
    for (; i < s.size() && s[i] != '.' && !is_digit(s[i]); ++i) {
    }
    if (i == 0) throw std::invalid_argument("time: missing unit in duration " + quote(text));
    const std::string_view unit_text = s.substr(0, i);
    s.remove_prefix(i);
    const u64 unit = unit_in_ns(unit_text);
    if (unit == 0) {
      throw std::invalid_argument("time: unknown unit " + quote(unit_text) + " in duration " +
                                  quote(text));
    }

    if (v > kMaxMagnitude / unit) invalid(text);
    v *= unit;
    if (f.value > 0) {
      // Same float64 expression as Go, so fractions of hours round to the very same nanosecond.
      v += static_cast<u64>(static_cast<double>(f.value) * (static_cast<double>(unit) / f.scale));
      if (v > kMaxMagnitude) invalid(text);
    }
    // Go writes `d += v` and then tests d > 2^63, which misses the wrap when both are exactly 2^63
    // ("9223372036854775808ns9223372036854775808ns" parses as 0 there); we reject that instead.
    if (v > kMaxMagnitude - total) invalid(text);
    total += v;
  }
  if (!neg && total > kMaxMagnitude - 1) invalid(text);
  // Modular conversion (well defined since C++20) maps the magnitude 2^63 to INT64_MIN.
  return std::chrono::nanoseconds{static_cast<std::int64_t>(neg ? 0 - total : total)};
}

std::string format_go_duration(std::chrono::nanoseconds d) {
  const std::int64_t n = d.count();
  const std::string sign = n < 0 ? "-" : "";
  // Negating in unsigned arithmetic keeps INT64_MIN representable.
  const u64 u = n < 0 ? 0 - static_cast<u64>(n) : static_cast<u64>(n);

  if (u == 0) return "0s";
  // Below a second, pick the unit that keeps the leading digit non-zero.
  if (u < 1'000) return sign + std::to_string(u) + "ns";
  if (u < 1'000'000) return sign + std::to_string(u / 1'000) + fraction(u, 3) + "\u00B5s";
  if (u < 1'000'000'000) return sign + std::to_string(u / 1'000'000) + fraction(u, 6) + "ms";

  // Hours are the largest unit because days can differ in length.
  const u64 secs = u / 1'000'000'000;
  std::string out = sign;
  if (secs >= 3600) out += std::to_string(secs / 3600) + "h";
  if (secs >= 60) out += std::to_string(secs / 60 % 60) + "m";
  return out + std::to_string(secs % 60) + fraction(u, 9) + "s";
}

}  // namespace lk
