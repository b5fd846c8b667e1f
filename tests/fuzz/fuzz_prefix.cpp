// The prefix on its way to the local backend: validate_prefix, then encode_prefix, which names the
// prefix's directory inside the state directory.
//
// Input: prefixes separated by NUL bytes (which no prefix may hold), the first eight checked.
// validate_prefix must return or throw lk::UsageError (one printable line); what it returns has
// no trailing '/', no leading '/', no control character and no empty, "." or ".." component.
// encode_prefix must then return, or throw UsageError only when the name would pass 255 bytes;
// the name must be one path component that no prefix can use to leave the state directory or
// take the reserved "@fence": not empty, not "." or "..", no '/', no leading '@', only
// [A-Za-z0-9._-] and "%XX" (uppercase hex), a prefix of those characters alone unchanged, and it
// must decode back to the prefix. Two different prefixes must get different names.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/local/state_dir.hpp"
#include "backend/prefix.hpp"
#include "fuzz_check.hpp"
#include "util/error.hpp"

namespace {

constexpr std::size_t kNameMax = 255;  // NAME_MAX of Linux file systems
constexpr std::size_t kPieces = 8;

bool plain(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lowercase too: one spelling per byte, or two names could mean one prefix
}

// The inverse of encode_prefix, strict: a name it does not accept fails the check.
bool decode(std::string_view name, std::string& out) {
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '%') {
      if (!plain(static_cast<unsigned char>(name[i]))) return false;
      out += name[i];
      continue;
    }
    if (name.size() - i < 3) return false;
    int hi = hex_digit(name[i + 1]), lo = hex_digit(name[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi << 4 | lo);
    i += 2;
  }
  return true;
}

void check_validated(std::string_view input, const std::string& prefix) {
  FUZZ_CHECK_MSG(input.starts_with(prefix), fuzz::shown(prefix));
  FUZZ_CHECK_MSG(input.substr(prefix.size()).find_first_not_of('/') == std::string_view::npos,
                 fuzz::shown(prefix));
  FUZZ_CHECK_MSG(!prefix.empty() && prefix.front() != '/' && prefix.back() != '/',
                 fuzz::shown(prefix));
  for (unsigned char c : prefix) FUZZ_CHECK_MSG(c >= 0x20 && c != 0x7f, fuzz::shown(prefix));
  for (const auto& part : fuzz::split(prefix, '/'))
    FUZZ_CHECK_MSG(!part.empty() && part != "." && part != "..", fuzz::shown(prefix));
}

void check_name(const std::string& prefix, const std::string& name) {
  const std::string detail = fuzz::shown(prefix) + " -> " + fuzz::shown(name);
  FUZZ_CHECK_MSG(!name.empty() && name.size() <= kNameMax, detail);
  FUZZ_CHECK_MSG(name != "." && name != "..", detail);
  FUZZ_CHECK_MSG(name.find('/') == std::string::npos && name.front() != '@', detail);
  std::string back;
  FUZZ_CHECK_MSG(decode(name, back) && back == prefix, detail + " decodes as " + fuzz::shown(back));
  bool all_plain = true;
  for (unsigned char c : prefix) all_plain = all_plain && plain(c);
  FUZZ_CHECK_MSG(!all_plain || name == prefix, detail);
}

struct Named {
  std::string prefix, name;
};

// `input` as a prefix and its directory name, or nullopt when the prefix is refused.
std::optional<Named> check_one(std::string_view input) {
  std::string prefix;
  try {
    prefix = lk::validate_prefix(input);
  } catch (const lk::UsageError& e) {
    FUZZ_CHECK_MSG(fuzz::printable_line(e.what()), fuzz::shown(e.what()));
    return std::nullopt;
  }
  check_validated(input, prefix);
  std::string name;
  try {
    name = lk::encode_prefix(prefix);
  } catch (const lk::UsageError& e) {
    FUZZ_CHECK_MSG(fuzz::printable_line(e.what()), fuzz::shown(e.what()));
    std::size_t length = 0;
    for (unsigned char c : prefix) length += plain(c) ? 1 : 3;
    FUZZ_CHECK_MSG(length > kNameMax, fuzz::shown(prefix) + " refused as too long");
    return std::nullopt;
  }
  check_name(prefix, name);
  return Named{std::move(prefix), std::move(name)};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto pieces = fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), '\0');
  if (pieces.size() > kPieces) pieces.resize(kPieces);
  std::vector<Named> seen;
  for (const auto& piece : pieces) {
    auto now = check_one(piece);
    if (!now) continue;
    for (const auto& before : seen)
      FUZZ_CHECK_MSG((before.prefix == now->prefix) == (before.name == now->name),
                     fuzz::shown(before.prefix) + " -> " + fuzz::shown(before.name) + ", " +
                         fuzz::shown(now->prefix) + " -> " + fuzz::shown(now->name));
    seen.push_back(std::move(*now));
  }
  return 0;
}
