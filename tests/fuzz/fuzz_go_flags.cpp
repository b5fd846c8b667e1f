// The command line: split_go_flags, parse_go_int, parse_go_bool and parse_options.
//
// Input: the arguments after argv[0], separated by NUL bytes. Leading arguments of the form
// "@NAME=VALUE" set one of the environment variables parse_options reads, for this input only.
//
// Each parser must succeed or throw its documented type; anything else escapes and is reported.
// split_go_flags and parse_go_int must agree with references written from Go's flag.parseOne and
// strconv.ParseInt; an accepted Options must hold every value parse_options checks.
#include <chrono>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/consul/consul_options.hpp"
#include "backend/etcd/etcd_options.hpp"
#include "backend/local/local_options.hpp"
#include "backend/prefix.hpp"
#include "backend/zookeeper/zk_options.hpp"
#include "cli/go_flags.hpp"
#include "cli/options.hpp"
#include "fuzz_check.hpp"
#include "util/error.hpp"

using namespace std::chrono_literals;

namespace {

// Every variable parse_options reads.
const std::vector<std::string>& environment() {
  static const std::vector<std::string> names = lk::option_variables();
  return names;
}

void clear_environment() {
  for (const std::string& name : environment()) unsetenv(name.c_str());
}

// --- strconv.ParseInt(s, 0, 64), ported from Go's src/strconv/atoi.go ---------------------------

enum class IntOutcome { ok, syntax, range };
struct GoInt {
  IntOutcome outcome;
  long long value = 0;
};

char lower(char c) { return static_cast<char>(c | ('x' - 'X')); }

// Go's underscoreOK: underscores only between digits, or between a base prefix and a digit.
bool underscore_ok(std::string_view s) {
  char saw = '^';
  std::size_t i = 0;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  bool hex = false;
  if (s.size() >= 2 && s[0] == '0' && (lower(s[1]) == 'b' || lower(s[1]) == 'o' || lower(s[1]) == 'x')) {
    i = 2;
    saw = '0';
    hex = lower(s[1]) == 'x';
  }
  for (; i < s.size(); ++i) {
    if ((s[i] >= '0' && s[i] <= '9') || (hex && lower(s[i]) >= 'a' && lower(s[i]) <= 'f')) {
      saw = '0';
      continue;
    }
    if (s[i] == '_') {
      if (saw != '0') return false;
      saw = '_';
      continue;
    }
    if (saw == '_') return false;
    saw = '!';
  }
  return saw != '_';
}

// ParseUint(s, 0, 64): note that it reports a range error the moment the value passes 2^64 - 1,
// before looking at the rest of the text.
GoInt go_parse_uint(std::string_view s, unsigned long long& n) {
  if (s.empty()) return {IntOutcome::syntax};
  const std::string_view s0 = s;
  unsigned base = 10;
  if (s[0] == '0') {
    if (s.size() >= 3 && lower(s[1]) == 'b') {
      base = 2;
      s.remove_prefix(2);
    } else if (s.size() >= 3 && lower(s[1]) == 'o') {
      base = 8;
      s.remove_prefix(2);
    } else if (s.size() >= 3 && lower(s[1]) == 'x') {
      base = 16;
      s.remove_prefix(2);
    } else {
      base = 8;
      s.remove_prefix(1);
    }
  }
  const unsigned long long cutoff = ~0ULL / base + 1;
  bool underscores = false;
  n = 0;
  for (char c : s) {
    unsigned d;
    if (c == '_') {
      underscores = true;
      continue;
    } else if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (lower(c) >= 'a' && lower(c) <= 'z') {
      d = static_cast<unsigned>(lower(c) - 'a' + 10);
    } else {
      return {IntOutcome::syntax};
    }
    if (d >= base) return {IntOutcome::syntax};
    if (n >= cutoff) return {IntOutcome::range};
    n *= base;
    unsigned long long n1 = n + d;
    if (n1 < n) return {IntOutcome::range};
    n = n1;
  }
  if (underscores && !underscore_ok(s0)) return {IntOutcome::syntax};
  return {IntOutcome::ok};
}

GoInt go_parse_int(std::string_view s) {
  if (s.empty()) return {IntOutcome::syntax};
  bool neg = false;
  if (s[0] == '+') {
    s.remove_prefix(1);
  } else if (s[0] == '-') {
    neg = true;
    s.remove_prefix(1);
  }
  unsigned long long un = 0;
  GoInt u = go_parse_uint(s, un);
  if (u.outcome == IntOutcome::syntax) return u;
  if (u.outcome == IntOutcome::range) return {IntOutcome::range};
  const unsigned long long cutoff = 1ULL << 63;
  if (!neg && un >= cutoff) return {IntOutcome::range};
  if (neg && un > cutoff) return {IntOutcome::range};
  return {IntOutcome::ok, neg ? static_cast<long long>(0 - un) : static_cast<long long>(un)};
}

void check_parse_int(const std::string& text) {
  GoInt want = go_parse_int(text);
  IntOutcome got;
  long long value = 0;
  try {
    value = lk::parse_go_int(text);
    got = IntOutcome::ok;
  } catch (const std::out_of_range&) {
    got = IntOutcome::range;
  } catch (const std::invalid_argument&) {
    got = IntOutcome::syntax;
  }
  static const char* const kNames[] = {"ok", "syntax error", "range error"};
  FUZZ_CHECK_MSG(got == want.outcome,
                 "parse_go_int(" + fuzz::shown(text) + "): " + kNames[static_cast<int>(got)] +
                     ", Go's ParseInt: " + kNames[static_cast<int>(want.outcome)]);
  FUZZ_CHECK_MSG(got != IntOutcome::ok || value == want.value,
                 "parse_go_int(" + fuzz::shown(text) + ") = " + std::to_string(value) +
                     ", Go's ParseInt: " + std::to_string(want.value));
}

void check_parse_bool(const std::string& text) {
  std::optional<bool> want;
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"})
    if (text == t) want = true;
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"})
    if (text == f) want = false;
  FUZZ_CHECK_MSG(lk::parse_go_bool(text) == want, fuzz::shown(text));
}

// --- flag.FlagSet.parseOne, as go_flags.hpp describes its deviations ----------------------------

std::optional<lk::FlagKind> kind_of(std::string_view name) {
  for (const char* b : {"h", "help", "verbose", "shell", "status"})
    if (name == b) return lk::FlagKind::boolean;
  for (const char* v : {"n", "name", "timeout", "try"})
    if (name == v) return lk::FlagKind::value;
  return std::nullopt;
}

// nullopt where the arguments must be refused.
std::optional<lk::GoArgs> reference_split(const std::vector<std::string>& args) {
  lk::GoArgs out;
  std::size_t i = 0;
  while (i < args.size()) {
    const std::string& s = args[i];
    if (s.size() < 2 || s[0] != '-') break;
    std::size_t minuses = 1;
    if (s[1] == '-') {
      minuses = 2;
      if (s.size() == 2) {  // "--" ends the flags
        ++i;
        break;
      }
    }
    std::string name = s.substr(minuses);
    if (name.empty() || name[0] == '-' || name[0] == '=') return std::nullopt;
    ++i;
    bool has_value = false;
    std::string value;
    for (std::size_t k = 1; k < name.size(); ++k) {  // '=' cannot come first
      if (name[k] == '=') {
        value = name.substr(k + 1);
        has_value = true;
        name.resize(k);
        break;
      }
    }
    auto kind = kind_of(name);
    if (!kind) return std::nullopt;
    if (*kind == lk::FlagKind::boolean) {
      std::optional<bool> b = has_value ? lk::parse_go_bool(value) : true;  // checked above
      if (!b) return std::nullopt;
      value = *b ? "true" : "false";
    } else if (!has_value) {
      if (i == args.size()) return std::nullopt;
      value = args[i++];
    }
    out.flags.emplace_back(name, value);
    if (name == "h" || name == "help") return out;
  }
  out.rest.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

void check_split(const std::vector<std::string>& args) {
  std::optional<lk::GoArgs> want = reference_split(args);
  std::optional<lk::GoArgs> got;
  try {
    got = lk::split_go_flags(args, kind_of);
  } catch (const lk::UsageError& e) {
    FUZZ_CHECK_MSG(*e.what() != '\0', "an empty message");
  }
  FUZZ_CHECK_MSG(got.has_value() == want.has_value(),
                 got ? "accepted what Go's flag package refuses" : "refused what Go's flag package accepts");
  if (!got) return;
  FUZZ_CHECK(got->flags == want->flags);
  FUZZ_CHECK(got->rest == want->rest);
}

// --- parse_options -------------------------------------------------------------------------------

// A prefix as validate_prefix promises to return it, checked without calling it.
bool checked_prefix(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.back() == '/') return false;
  for (unsigned char c : p)
    if (c < 0x20 || c == 0x7f) return false;
  for (const std::string& part : fuzz::split(p, '/'))
    if (part.empty() || part == "." || part == "..") return false;
  return true;
}

void check_options(const std::vector<std::string>& args) {
  lk::Options o;
  try {
    o = lk::parse_options(args);
  } catch (const lk::UsageError& e) {
    FUZZ_CHECK_MSG(*e.what() != '\0', "an empty message");
    return;
  }
  if (o.help || o.version) return;  // nothing else is looked at then

  FUZZ_CHECK(o.limit >= 1);
  FUZZ_CHECK(o.monitor_retry >= 0);
  FUZZ_CHECK(o.timeout >= 0ns);
  FUZZ_CHECK(o.kill_after >= 0ns);
  FUZZ_CHECK_MSG(checked_prefix(o.prefix), fuzz::shown(o.prefix));
  FUZZ_CHECK(lk::validate_prefix(o.prefix) == o.prefix);
  FUZZ_CHECK(o.status ? o.child.empty() : !o.child.empty());
  FUZZ_CHECK(o.status || !o.json);
  FUZZ_CHECK(!o.name.empty());
  FUZZ_CHECK_MSG(o.backend == "local" || o.backend == "consul" || o.backend == "etcd" ||
                     o.backend == "zookeeper",
                 fuzz::shown(o.backend));
  // The chosen backend's configuration, as its own type: made for it, told the core options.
  FUZZ_CHECK(o.backend_config != nullptr);
  FUZZ_CHECK(o.backend_config->status_only == o.status && o.backend_config->kill_after == o.kill_after &&
             o.backend_config->monitor_retry == o.monitor_retry);
  if (o.backend == "local") FUZZ_CHECK(dynamic_cast<const lk::LocalOptions*>(o.backend_config.get()));
  if (o.backend == "zookeeper") {
    auto* z = dynamic_cast<const lk::ZkOptions*>(o.backend_config.get());
    FUZZ_CHECK(z && !z->connect.empty() && z->session_ttl >= 1ms);
  }
  if (o.backend == "etcd") {
    auto* e = dynamic_cast<const lk::EtcdOptions*>(o.backend_config.get());
    FUZZ_CHECK(e && !e->client.endpoints.empty());
    for (const std::string& url : e->client.endpoints) FUZZ_CHECK_MSG(url.find("://") != std::string::npos, url);
    FUZZ_CHECK(e->session_ttl >= 1s && e->session_ttl % 1s == 0ns);
  }
  if (o.backend == "consul") {
    auto* c = dynamic_cast<const lk::ConsulOptions*>(o.backend_config.get());
    FUZZ_CHECK(c && !c->client.address.empty());
    FUZZ_CHECK(c->session_ttl >= 10s && c->session_ttl <= 24h);
    FUZZ_CHECK(c->lock_delay >= 0s && c->lock_delay <= 60s);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  clear_environment();  // the developer's own must not make runs differ
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args =
      fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), '\0');
  if (size == 0) args.clear();

  std::size_t first = 0;
  for (; first < args.size() && args[first].starts_with('@'); ++first) {
    auto eq = args[first].find('=');
    std::string name = args[first].substr(1, eq == std::string::npos ? std::string::npos : eq - 1);
    for (const std::string& known : environment())
      if (name == known) setenv(name.c_str(), eq == std::string::npos ? "" : args[first].c_str() + eq + 1, 1);
  }
  args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(first));

  for (const std::string& a : args) {
    check_parse_int(a);
    check_parse_bool(a);
    // The value half of "-flag=value" too: that is what reaches parse_go_int in real use.
    if (auto eq = a.find('='); eq != std::string::npos) check_parse_int(a.substr(eq + 1));
  }
  check_split(args);
  check_options(args);
  clear_environment();
  return 0;
}
