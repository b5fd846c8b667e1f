#include "cli/go_flags.hpp"

#include <stdexcept>

#include "util/error.hpp"

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
  if (misplaced_underscore || (prefixed && !any) || !after_digit) throw std::invalid_argument("parse error");
  if (value > (negative ? (1ULL << 63) : (1ULL << 63) - 1)) throw std::out_of_range("value out of range");
  return negative ? static_cast<long long>(0 - value) : static_cast<long long>(value);
}

GoArgs split_go_flags(const std::vector<std::string>& args,
                      const std::function<std::optional<FlagKind>(std::string_view)>& kind_of) {
  GoArgs out;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') break;  // the prefix (or a lone "-")
    if (arg == "--") {
      ++i;
      break;
    }
    std::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
    if (body.empty() || body[0] == '-' || body[0] == '=')
      throw UsageError("bad flag syntax: " + std::string(arg));
    auto eq = body.find('=');
    std::string name(body.substr(0, eq));
    auto kind = kind_of(name);
    if (!kind) throw UsageError("flag provided but not defined: -" + name);
    std::optional<std::string> value;
    if (eq != std::string_view::npos) value = std::string(body.substr(eq + 1));
    if (*kind == FlagKind::boolean) {
      auto b = parse_go_bool(value.value_or("true"));
      if (!b)
        throw UsageError("invalid boolean value \"" + *value + "\" for -" + name + ": parse error");
      value = *b ? "true" : "false";
    } else if (!value) {
      if (i + 1 == args.size()) throw UsageError("flag needs an argument: -" + name);
      value = args[++i];
    }
    out.flags.emplace_back(std::move(name), std::move(*value));
    if (out.flags.back().first == "h" || out.flags.back().first == "help") return out;
  }
  out.rest.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

}  // namespace lk
