#pragma once
// What every fuzz target shares: a check that NDEBUG does not remove and that names what broke
// (libFuzzer reports the abort as a crash and keeps the input), and the shape of text meant for
// a one-line message.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace fuzz {

[[noreturn]] inline void fail(const char* what, const std::string& detail, const char* file, int line) {
  std::fprintf(stderr, "\n%s:%d: invariant broken: %s\n", file, line, what);
  if (!detail.empty()) std::fprintf(stderr, "  %s\n", detail.c_str());
  std::abort();
}

// Bytes as a C++ string literal would show them, for the failure report.
inline std::string shown(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out + "\"";
}

// The length of the well-formed UTF-8 character `s` starts with (RFC 3629: no overlong forms,
// no surrogates, nothing past U+10FFFF), or 0; `code` receives its code point.
inline std::size_t utf8_char(std::string_view s, char32_t* code = nullptr) {
  if (s.empty()) return 0;
  auto lead = static_cast<unsigned char>(s[0]);
  std::size_t n = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || s.size() < n) return 0;
  char32_t cp = n == 1 ? lead : lead & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) {
    auto t = static_cast<unsigned char>(s[k]);
    if ((t & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (t & 0x3F);
  }
  static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (code) *code = cp;
  return n;
}

inline bool utf8(std::string_view s) {
  for (std::size_t n; !s.empty(); s.remove_prefix(n))
    if ((n = utf8_char(s)) == 0) return false;
  return true;
}

// One line a terminal only displays: well-formed UTF-8 without control characters (C0, DEL and
// C1, which some terminals obey as they do ESC).
inline bool printable_line(std::string_view s) {
  char32_t c = 0;
  for (std::size_t n; !s.empty(); s.remove_prefix(n)) {
    if ((n = utf8_char(s, &c)) == 0 || c < 0x20 || (c >= 0x7f && c < 0xa0)) return false;
  }
  return true;
}

// The last sizeof(T) bytes of `bytes` (all of them when fewer) as a T, zero-filled, taken off its
// end. An empty input may have no data pointer at all: memcpy never sees it.
template <class T>
T take_tail(std::string_view& bytes) {
  T value{};
  std::size_t tail = std::min(bytes.size(), sizeof value);
  if (tail) std::memcpy(&value, bytes.data() + bytes.size() - tail, tail);
  bytes.remove_suffix(tail);
  return value;
}

inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  for (std::size_t at; (at = s.find(sep)) != std::string_view::npos; s.remove_prefix(at + 1))
    out.emplace_back(s.substr(0, at));
  out.emplace_back(s);
  return out;
}

// The framing the reply targets share: the first byte picks an operation from `ops` (any other
// byte maps onto one), then a line of tab-separated arguments (at least two), then the body.
struct Operation {
  char op;
  std::vector<std::string> args;
  std::string_view body;
};

inline Operation operation(const std::uint8_t* data, std::size_t size, std::string_view ops) {
  char op = static_cast<char>(data[0]);
  if (ops.find(op) == std::string_view::npos) op = ops[data[0] % ops.size()];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string_view line = rest.substr(0, rest.find('\n'));
  std::string_view body = line.size() < rest.size() ? rest.substr(line.size() + 1) : std::string_view();
  std::vector<std::string> args = split(line, '\t');
  args.resize(std::max<std::size_t>(args.size(), 2));
  return {op, std::move(args), body};
}

}  // namespace fuzz

#define FUZZ_CHECK(cond) ((cond) ? (void)0 : ::fuzz::fail(#cond, "", __FILE__, __LINE__))
#define FUZZ_CHECK_MSG(cond, detail) ((cond) ? (void)0 : ::fuzz::fail(#cond, (detail), __FILE__, __LINE__))
