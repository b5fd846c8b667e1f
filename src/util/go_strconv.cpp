#include "util/go_strconv.hpp"

#include <stdexcept>

namespace lk {

std::optional<bool> parse_go_bool(std::string_view text) {
  for (auto t : {"1", "t", "T", "TRUE", "true", "True"})
    if (text == t) return true;
  for (auto f : {"0", "f", "F", "FALSE", "false", "False"})
    if (text == f) return false;
  return std::nullopt;
}

long long parse_go_int(std::string_view s) {
  bool negative = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  int base = 10;
  bool prefixed = false, after_digit = false, any = false, misplaced_underscore = false;
  if (s.size() > 1 && s[0] == '0') {
    char p = static_cast<char>(s[1] | 0x20);
    prefixed = p == 'x' || p == 'o' || p == 'b';
    base = p == 'x' ? 16 : p == 'b' ? 2 : 8;
    s.remove_prefix(prefixed ? 2 : 1);
    after_digit = true;  // Go lets an underscore follow the base prefix (or the leading 0)
  }
  unsigned long long value = 0;
  for (char c : s) {
    if (c == '_') {
      // Like Go, judge where underscores stand only once every digit is read.
      if (!after_digit) misplaced_underscore = true;
      after_digit = false;
      continue;
    }
    int lower = c | 0x20;
    int d = c >= '0' && c <= '9' ? c - '0' : lower >= 'a' && lower <= 'z' ? lower - 'a' + 10 : 99;
    if (d >= base) throw std::invalid_argument("parse error");
    // ParseUint gives up the moment the magnitude passes 2^64 - 1, whatever follows.
    if (value > (~0ULL - static_cast<unsigned>(d)) / static_cast<unsigned>(base))
      throw std::out_of_range("value out of range");
    value = value * static_cast<unsigned>(base) + static_cast<unsigned>(d);
    after_digit = any = true;
  }
  if (misplaced_underscore || (prefixed && !any) || !after_digit)
    throw std::invalid_argument("parse error");
  if (value > (negative ? (1ULL << 63) : (1ULL << 63) - 1))
    throw std::out_of_range("value out of range");
  return negative ? static_cast<long long>(0 - value) : static_cast<long long>(value);
}

}  // namespace lk
