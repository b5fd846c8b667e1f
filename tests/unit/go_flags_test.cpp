// split_go_flags must read the command line exactly as Go's flag package does, since users type
// `consul lock` command lines; the error strings are Go's own (flag.FlagSet.parseOne).
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/go_flags.hpp"
#include "util/error.hpp"

using lk::FlagKind;
using lk::GoArgs;
using lk::parse_go_bool;
using lk::split_go_flags;

namespace {

using Args = std::vector<std::string>;
using Flags = std::vector<std::pair<std::string, std::string>>;

// A small flag table: two booleans and three flags that take a value.
std::optional<FlagKind> kind_of(std::string_view name) {
  if (name == "shell" || name == "verbose") return FlagKind::boolean;
  if (name == "n" || name == "name" || name == "timeout") return FlagKind::value;
  return std::nullopt;
}

GoArgs split(const Args& args) { return split_go_flags(args, kind_of); }

// The UsageError message for `args`, or "" when they parse.
std::string error_of(const Args& args) {
  try {
    split(args);
  } catch (const lk::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("parse_go_bool accepts exactly strconv.ParseBool's spellings") {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    CAPTURE(t);
    CHECK(parse_go_bool(t) == std::optional<bool>(true));
  }
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
    CAPTURE(f);
    CHECK(parse_go_bool(f) == std::optional<bool>(false));
  }
  for (const char* bad : {"", "yes", "no", "y", "n", "on", "off", "tRUE", "fALSE", "TrUe", "2",
                          "-1", "01", " true", "true ", "truee"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_go_bool(bad).has_value());
  }
}

TEST_CASE("no arguments give no flags and nothing left") {
  GoArgs go = split({});
  CHECK(go.flags.empty());
  CHECK(go.rest.empty());
}

TEST_CASE("one and two dashes name the same flag") {
  CHECK(split({"-n", "3", "p"}).flags == Flags{{"n", "3"}});
  CHECK(split({"--n", "3", "p"}).flags == Flags{{"n", "3"}});
  CHECK(split({"-name=x", "p"}).flags == Flags{{"name", "x"}});
  CHECK(split({"--name=x", "p"}).flags == Flags{{"name", "x"}});
}

TEST_CASE("a value flag takes its value after '=' or from the next argument") {
  GoArgs joined = split({"-timeout=5s", "p", "cmd"});
  CHECK(joined.flags == Flags{{"timeout", "5s"}});
  CHECK(joined.rest == Args{"p", "cmd"});

  GoArgs separate = split({"-timeout", "5s", "p", "cmd"});
  CHECK(separate.flags == Flags{{"timeout", "5s"}});
  CHECK(separate.rest == Args{"p", "cmd"});
}

TEST_CASE("a value after '=' is taken verbatim, even empty or containing '='") {
  CHECK(split({"-name=", "p"}).flags == Flags{{"name", ""}});
  CHECK(split({"-name=a=b", "p"}).flags == Flags{{"name", "a=b"}});
  CHECK(split({"-name=-x", "p"}).flags == Flags{{"name", "-x"}});
  CHECK(split({"-name= spaced out ", "p"}).flags == Flags{{"name", " spaced out "}});
}

TEST_CASE("the argument after a value flag is its value, even when it looks like a flag") {
  // Go takes the next argument unconditionally.
  CHECK(split({"-name", "-verbose", "p"}).flags == Flags{{"name", "-verbose"}});
  CHECK(split({"-name", "--", "p"}).flags == Flags{{"name", "--"}});
  CHECK(split({"-name", "", "p"}).flags == Flags{{"name", ""}});
  CHECK(split({"-name", "-", "p"}).flags == Flags{{"name", "-"}});
  GoArgs go = split({"-name", "-bogus", "p", "c"});
  CHECK(go.flags == Flags{{"name", "-bogus"}});
  CHECK(go.rest == Args{"p", "c"});
}

TEST_CASE("a boolean flag alone means true") {
  CHECK(split({"-verbose", "p"}).flags == Flags{{"verbose", "true"}});
  CHECK(split({"--shell", "p"}).flags == Flags{{"shell", "true"}});
}

TEST_CASE("a boolean takes a value only after '=' and normalises it") {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    CAPTURE(t);
    CHECK(split({std::string("-shell=") + t, "p"}).flags == Flags{{"shell", "true"}});
  }
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
    CAPTURE(f);
    CHECK(split({std::string("--shell=") + f, "p"}).flags == Flags{{"shell", "false"}});
  }
}

TEST_CASE("the word after a boolean flag is not its value") {
  // `-shell false` sets shell and makes "false" the first positional argument, as in Go.
  GoArgs go = split({"-shell", "false", "cmd"});
  CHECK(go.flags == Flags{{"shell", "true"}});
  CHECK(go.rest == Args{"false", "cmd"});
}

TEST_CASE("a bad boolean value is refused in Go's words") {
  CHECK(error_of({"-shell=maybe", "p"}) ==
        "invalid boolean value \"maybe\" for -shell: parse error");
  CHECK(error_of({"--verbose=yes", "p"}) ==
        "invalid boolean value \"yes\" for -verbose: parse error");
  CHECK(error_of({"-shell=", "p"}) == "invalid boolean value \"\" for -shell: parse error");
  CHECK(error_of({"-shell=tRuE", "p"}) == "invalid boolean value \"tRuE\" for -shell: parse error");
}

TEST_CASE("flags are kept in the order given, repeats included") {
  GoArgs go = split({"-n", "2", "-verbose", "-n=3", "-shell=false", "--name", "x", "p"});
  CHECK(go.flags ==
        Flags{{"n", "2"}, {"verbose", "true"}, {"n", "3"}, {"shell", "false"}, {"name", "x"}});
  CHECK(go.rest == Args{"p"});
}

TEST_CASE("parsing stops at the first argument that is not a flag") {
  GoArgs go = split({"-verbose", "prefix", "-n", "3", "--", "-bogus"});
  CHECK(go.flags == Flags{{"verbose", "true"}});
  CHECK(go.rest == Args{"prefix", "-n", "3", "--", "-bogus"});
}

TEST_CASE("a lone '-' is a positional argument") {
  GoArgs go = split({"-verbose", "-", "-n", "2"});
  CHECK(go.flags == Flags{{"verbose", "true"}});
  CHECK(go.rest == Args{"-", "-n", "2"});
}

TEST_CASE("an empty argument is a positional argument") {
  GoArgs go = split({"-verbose", "", "-n", "2"});
  CHECK(go.flags == Flags{{"verbose", "true"}});
  CHECK(go.rest == Args{"", "-n", "2"});
}

TEST_CASE("'--' ends the flags and is itself dropped") {
  GoArgs go = split({"-verbose", "--", "-n", "2", "--"});
  CHECK(go.flags == Flags{{"verbose", "true"}});
  CHECK(go.rest == Args{"-n", "2", "--"});

  GoArgs only = split({"--"});
  CHECK(only.flags.empty());
  CHECK(only.rest.empty());

  GoArgs first = split({"--", "-verbose"});
  CHECK(first.flags.empty());
  CHECK(first.rest == Args{"-verbose"});
}

TEST_CASE("a second '--' after the positional arguments belongs to them") {
  GoArgs go = split({"p", "--", "x"});
  CHECK(go.flags.empty());
  CHECK(go.rest == Args{"p", "--", "x"});
}

TEST_CASE("an unknown flag is refused in Go's words") {
  CHECK(error_of({"-bogus", "p"}) == "flag provided but not defined: -bogus");
  CHECK(error_of({"--bogus", "p"}) == "flag provided but not defined: -bogus");
  CHECK(error_of({"-bogus=1", "p"}) == "flag provided but not defined: -bogus");
  CHECK(error_of({"-verbose", "-bogus", "p"}) == "flag provided but not defined: -bogus");
  // Flag names are case-sensitive.
  CHECK(error_of({"-Verbose", "p"}) == "flag provided but not defined: -Verbose");
  CHECK(error_of({"-N", "2", "p"}) == "flag provided but not defined: -N");
}

TEST_CASE("an unknown flag after the first positional argument is not looked at") {
  CHECK(error_of({"p", "-bogus"}).empty());
}

TEST_CASE("a value flag at the end without a value is refused in Go's words") {
  CHECK(error_of({"-timeout"}) == "flag needs an argument: -timeout");
  CHECK(error_of({"--n"}) == "flag needs an argument: -n");
  CHECK(error_of({"-verbose", "-name"}) == "flag needs an argument: -name");
}

TEST_CASE("malformed flags are refused as bad flag syntax") {
  CHECK(error_of({"---x", "p"}) == "bad flag syntax: ---x");
  CHECK(error_of({"---verbose", "p"}) == "bad flag syntax: ---verbose");
  CHECK(error_of({"-=x", "p"}) == "bad flag syntax: -=x");
  CHECK(error_of({"--=x", "p"}) == "bad flag syntax: --=x");
  CHECK(error_of({"-=", "p"}) == "bad flag syntax: -=");
  CHECK(error_of({"---", "p"}) == "bad flag syntax: ---");
}

TEST_CASE("the first error wins and later arguments are not examined") {
  CHECK(error_of({"-bogus", "---x"}) == "flag provided but not defined: -bogus");
  CHECK(error_of({"---x", "-bogus"}) == "bad flag syntax: ---x");
  CHECK(error_of({"-shell=maybe", "-timeout"}) ==
        "invalid boolean value \"maybe\" for -shell: parse error");
}

TEST_CASE("errors are UsageErrors") {
  CHECK_THROWS_AS(split({"-bogus"}), lk::UsageError);
  CHECK_THROWS_AS(split({"-timeout"}), lk::UsageError);
  CHECK_THROWS_AS(split({"-shell=x"}), lk::UsageError);
  CHECK_THROWS_AS(split({"---x"}), lk::UsageError);
}

TEST_CASE("kind_of is asked about the name without dashes or value") {
  std::vector<std::string> asked;
  auto recording = [&](std::string_view name) -> std::optional<FlagKind> {
    asked.emplace_back(name);
    return FlagKind::value;
  };
  split_go_flags({"--timeout=1s", "-name", "x", "p"}, recording);
  CHECK(asked == std::vector<std::string>{"timeout", "name"});
}

TEST_CASE("parse_go_int: out of range as soon as the magnitude passes 2^64-1, as Go's ParseInt") {
  CHECK_THROWS_AS(lk::parse_go_int("18446744073709551616x"), std::out_of_range);
  CHECK_THROWS_AS(lk::parse_go_int("99999999999999999999_"), std::out_of_range);
  CHECK_THROWS_AS(lk::parse_go_int("12x"), std::invalid_argument);
  CHECK_THROWS_AS(lk::parse_go_int("_1"), std::invalid_argument);
  CHECK_THROWS_AS(lk::parse_go_int("9223372036854775808"), std::out_of_range);
  CHECK(lk::parse_go_int("-9223372036854775808") == INT64_MIN);
  CHECK(lk::parse_go_int("1_000") == 1000);
}
