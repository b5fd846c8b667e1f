// validate_prefix keeps a prefix inside its own space; encode_prefix turns it into one flat,
// readable directory name; default_state_dir picks where the local backend keeps its files.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "backend/local/state_dir.hpp"
#include "backend/prefix.hpp"
#include "util/error.hpp"

using lk::default_state_dir;
using lk::encode_prefix;
using lk::validate_prefix;

namespace {

// The UsageError message for `prefix`, or "" when it is accepted.
std::string prefix_error(const std::string& prefix) {
  try {
    validate_prefix(prefix);
  } catch (const lk::UsageError& e) {
    return e.what();
  }
  return "";
}

// Sets (or unsets, with nullopt) one environment variable for a scope, then puts it back.
class EnvVar {
 public:
  EnvVar(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~EnvVar() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("validate_prefix accepts ordinary relative prefixes as they are") {
  for (const char* p : {"a", "a/b", "service/web", "a.b", "...", ".hidden", "a/.x/b..", "x-y_z",
                        "with space", "a:b@c", "-leading-dash", "caf\xc3\xa9", "\xff\xfe", "~"}) {
    CAPTURE(p);
    CHECK(validate_prefix(p) == p);
  }
}

TEST_CASE("validate_prefix drops trailing slashes") {
  CHECK(validate_prefix("a/") == "a");
  CHECK(validate_prefix("a/b///") == "a/b");
}

TEST_CASE("validate_prefix refuses an empty prefix") {
  for (const char* p : {"", "/", "//", "///"}) {
    CAPTURE(p);
    CHECK(prefix_error(p) == "the prefix must not be empty");
  }
}

TEST_CASE("validate_prefix refuses absolute prefixes") {
  CHECK(prefix_error("/a") == "prefix '/a' must be relative (no leading '/')");
  CHECK(prefix_error("/a/b/") == "prefix '/a/b/' must be relative (no leading '/')");
  CHECK(prefix_error("//a") == "prefix '//a' must be relative (no leading '/')");
}

TEST_CASE("validate_prefix refuses '.' and '..' components anywhere") {
  for (const char* p :
       {".", "..", "./a", "../a", "a/.", "a/..", "a/./b", "a/../b", "../../etc", "a/../"}) {
    CAPTURE(p);
    CHECK(prefix_error(p) ==
          std::string("prefix '") + p + "' must not contain '.' or '..' components");
  }
}

TEST_CASE("validate_prefix refuses empty components") {
  CHECK(prefix_error("a//b") == "prefix 'a//b' must not contain empty components");
  CHECK(prefix_error("a/b//c/") == "prefix 'a/b//c/' must not contain empty components");
}

TEST_CASE("validate_prefix refuses control characters") {
  // Shown escaped, so that the error stays on one line and cannot drive the terminal.
  const std::pair<std::string, std::string> cases[] = {
      {"a\nb", "a\\nb"},   {"a\tb", "a\\tb"},     {"\x1b[31m", "\\x1b[31m"},
      {"a\x7f", "a\\x7f"}, {"a\rb/c", "a\\rb/c"}, {"x\x01", "x\\x01"}};
  for (const auto& [p, shown] : cases) {
    CAPTURE(p);
    CHECK(prefix_error(p) == "prefix '" + shown + "' contains a control character");
  }
  // A NUL cannot come from argv, but must not cut the check short either.
  CHECK_THROWS_AS(validate_prefix(std::string("a\0b", 3)), lk::UsageError);
  CHECK_THROWS_AS(validate_prefix(std::string("\0", 1)), lk::UsageError);
}

TEST_CASE("validate_prefix errors are UsageErrors") {
  CHECK_THROWS_AS(validate_prefix(""), lk::UsageError);
  CHECK_THROWS_AS(validate_prefix("/a"), lk::UsageError);
  CHECK_THROWS_AS(validate_prefix("a/.."), lk::UsageError);
  CHECK_THROWS_AS(validate_prefix("a//b"), lk::UsageError);
  CHECK_THROWS_AS(validate_prefix("a\nb"), lk::UsageError);
}

TEST_CASE("encode_prefix keeps letters, digits, '.', '-' and '_'") {
  const std::string plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
  CHECK(encode_prefix(plain) == plain);
  CHECK(encode_prefix("...") == "...");
}

TEST_CASE("encode_prefix percent-encodes every other byte in upper-case hex") {
  CHECK(encode_prefix("a/b") == "a%2Fb");
  CHECK(encode_prefix("service/web/") == "service%2Fweb%2F");
  CHECK(encode_prefix(" ") == "%20");
  CHECK(encode_prefix("%") == "%25");
  CHECK(encode_prefix("a%2Fb") == "a%252Fb");
  CHECK(encode_prefix("~:@+=") == "%7E%3A%40%2B%3D");
  CHECK(encode_prefix("caf\xc3\xa9") == "caf%C3%A9");
  CHECK(encode_prefix("\xff") == "%FF");
  CHECK(encode_prefix(std::string("\0\n", 2)) == "%00%0A");
  CHECK(encode_prefix("") == "");
}

TEST_CASE("encode_prefix keeps distinct prefixes apart") {
  // "a/b" and the literal "a%2Fb" must not share a directory.
  CHECK(encode_prefix("a/b") != encode_prefix("a%2Fb"));
  CHECK(encode_prefix("a_b") != encode_prefix("a/b"));
  CHECK(encode_prefix("a b") != encode_prefix("a+b"));
}

TEST_CASE("encode_prefix never yields a name with '/' or a '.'/'..' name for a valid prefix") {
  for (const char* p : {"a/b", "a/./b", "..x", "a/..."}) {
    CAPTURE(p);
    std::string name = encode_prefix(p);
    CHECK(name.find('/') == std::string::npos);
    CHECK(name != ".");
    CHECK(name != "..");
  }
}

TEST_CASE("encode_prefix refuses names longer than a file name can be") {
  CHECK(encode_prefix(std::string(255, 'a')).size() == 255);
  CHECK(encode_prefix(std::string(85, '/')).size() == 255);

  // Named in the message cut short: a 100 KB prefix must not flood the terminal.
  std::string too_long(100000, 'a');
  CHECK_THROWS_WITH_AS(
      encode_prefix(too_long),
      ("prefix '" + std::string(200, 'a') + "...' is too long for the local backend").c_str(),
      lk::UsageError);
  // The limit is on the encoded name: 86 bytes that each take three characters are too many.
  std::string encoded_too_long(86, '/');
  CHECK_THROWS_AS(encode_prefix(encoded_too_long), lk::UsageError);
}

TEST_CASE("default_state_dir for root is /run/lock/lock, whatever the environment says") {
  if (geteuid() != 0) return;  // only root can see this rule
  EnvVar xdg("XDG_RUNTIME_DIR", "/run/user/0");
  CHECK(default_state_dir() == "/run/lock/lock");
  EnvVar none("XDG_RUNTIME_DIR", std::nullopt);
  CHECK(default_state_dir() == "/run/lock/lock");
}

TEST_CASE("default_state_dir for others is /run/lock/lock-<uid>, whatever the session says") {
  if (geteuid() == 0) return;  // root has a fixed place, checked above
  const std::string expected = access("/run/lock", W_OK | X_OK) == 0
                                   ? "/run/lock/lock-" + std::to_string(geteuid())
                                   : "/tmp/lock-" + std::to_string(geteuid());
  EnvVar xdg("XDG_RUNTIME_DIR", "/run/user/1000");
  CHECK(default_state_dir() == expected);
  EnvVar none("XDG_RUNTIME_DIR", std::nullopt);
  CHECK(default_state_dir() == expected);
}
