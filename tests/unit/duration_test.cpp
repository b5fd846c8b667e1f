// The tables below are Go's own, copied from src/time/time_test.go (parseDurationTests,
// parseDurationErrorTests, durationTests) so that lock matches time.ParseDuration and
// Duration.String case for case.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "util/duration.hpp"

using lk::format_go_duration;
using lk::parse_go_duration;
using std::chrono::nanoseconds;

namespace {

constexpr std::int64_t Nanosecond = 1;
constexpr std::int64_t Microsecond = 1000 * Nanosecond;
constexpr std::int64_t Millisecond = 1000 * Microsecond;
constexpr std::int64_t Second = 1000 * Millisecond;
constexpr std::int64_t Minute = 60 * Second;
constexpr std::int64_t Hour = 60 * Minute;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

struct ParseCase {
  const char* in;
  std::int64_t want;
};

const ParseCase kParseDurationTests[] = {
    // simple
    {"0", 0},
    {"5s", 5 * Second},
    {"30s", 30 * Second},
    {"1478s", 1478 * Second},
    // sign
    {"-5s", -5 * Second},
    {"+5s", 5 * Second},
    {"-0", 0},
    {"+0", 0},
    // decimal
    {"5.0s", 5 * Second},
    {"5.6s", 5 * Second + 600 * Millisecond},
    {"5.s", 5 * Second},
    {".5s", 500 * Millisecond},
    {"1.0s", 1 * Second},
    {"1.00s", 1 * Second},
    {"1.004s", 1 * Second + 4 * Millisecond},
    {"1.0040s", 1 * Second + 4 * Millisecond},
    {"100.00100s", 100 * Second + 1 * Millisecond},
    // different units
    {"10ns", 10 * Nanosecond},
    {"11us", 11 * Microsecond},
    {"12\u00B5s", 12 * Microsecond},  // U+00B5
    {"12\u03BCs", 12 * Microsecond},  // U+03BC
    {"13ms", 13 * Millisecond},
    {"14s", 14 * Second},
    {"15m", 15 * Minute},
    {"16h", 16 * Hour},
    // composite durations
    {"3h30m", 3 * Hour + 30 * Minute},
    {"10.5s4m", 4 * Minute + 10 * Second + 500 * Millisecond},
    {"-2m3.4s", -(2 * Minute + 3 * Second + 400 * Millisecond)},
    {"1h2m3s4ms5us6ns",
     1 * Hour + 2 * Minute + 3 * Second + 4 * Millisecond + 5 * Microsecond + 6 * Nanosecond},
    {"39h9m14.425s", 39 * Hour + 9 * Minute + 14 * Second + 425 * Millisecond},
    // large value
    {"52763797000ns", 52763797000 * Nanosecond},
    // more than 9 digits after decimal point, see https://golang.org/issue/6617
    {"0.3333333333333333333h", 20 * Minute},
    // 9007199254740993 = 1<<53+1 cannot be stored precisely in a float64
    {"9007199254740993ns", ((std::int64_t{1} << 53) + 1) * Nanosecond},
    // largest duration that can be represented by int64 in nanoseconds
    {"9223372036854775807ns", kMax},
    {"9223372036854775.807us", kMax},
    {"9223372036s854ms775us807ns", kMax},
    {"-9223372036854775808ns", kMin},
    {"-9223372036854775.808us", kMin},
    {"-9223372036s854ms775us808ns", kMin},
    // largest negative value
    {"-9223372036854775808ns", kMin},
    // largest negative round trip value, see https://golang.org/issue/48629
    {"-2562047h47m16.854775808s", kMin},
    // huge string; issue 15011.
    {"0.100000000000000000000h", 6 * Minute},
    // This value tests the first overflow check in leadingFraction.
    {"0.830103483285477580700h", 49 * Minute + 48 * Second + 372539827 * Nanosecond},
};

struct ErrorCase {
  std::string in;
  const char* expect;  // Go only asks that the message contain this
};

const ErrorCase kParseDurationErrorTests[] = {
    // invalid
    {"", R"("")"},
    {"3", R"("3")"},
    {"-", R"("-")"},
    {"s", R"("s")"},
    {".", R"(".")"},
    {"-.", R"("-.")"},
    {".s", R"(".s")"},
    {"+.s", R"("+.s")"},
    {"1d", R"("1d")"},
    {"\x85\x85", R"("\x85\x85")"},
    {"\xff"
     "ff",
     R"("\xffff")"},
    {"hello \xff"
     "ff world",
     R"("hello \xffff world")"},
    {"\uFFFD", R"("\xef\xbf\xbd")"},                                              // utf8.RuneError
    {"\uFFFD hello \uFFFD world", R"("\xef\xbf\xbd hello \xef\xbf\xbd world")"},  // utf8.RuneError
    // overflow
    {"9223372036854775810ns", R"("9223372036854775810ns")"},
    {"9223372036854775808ns", R"("9223372036854775808ns")"},
    {"-9223372036854775809ns", R"("-9223372036854775809ns")"},
    {"9223372036854776us", R"("9223372036854776us")"},
    {"3000000h", R"("3000000h")"},
    {"9223372036854775.808us", R"("9223372036854775.808us")"},
    {"9223372036854ms775us808ns", R"("9223372036854ms775us808ns")"},
};

struct FormatCase {
  const char* str;
  std::int64_t d;
};

const FormatCase kDurationTests[] = {
    {"0s", 0},
    {"1ns", 1 * Nanosecond},
    {"1.1\u00B5s", 1100 * Nanosecond},
    {"2.2ms", 2200 * Microsecond},
    {"3.3s", 3300 * Millisecond},
    {"4m5s", 4 * Minute + 5 * Second},
    {"4m5.001s", 4 * Minute + 5001 * Millisecond},
    {"5h6m7.001s", 5 * Hour + 6 * Minute + 7001 * Millisecond},
    {"8m0.000000001s", 8 * Minute + 1 * Nanosecond},
    {"2562047h47m16.854775807s", kMax},
    {"-2562047h47m16.854775808s", kMin},
};

// The message parse_go_duration throws for `in`, or "" when it accepts it.
std::string parse_error(const std::string& in) {
  try {
    parse_go_duration(in);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("parse_go_duration accepts Go's parseDurationTests") {
  for (const auto& tc : kParseDurationTests) {
    CAPTURE(tc.in);
    CHECK(parse_go_duration(tc.in).count() == tc.want);
  }
}

TEST_CASE("parse_go_duration rejects Go's parseDurationErrorTests") {
  for (const auto& tc : kParseDurationErrorTests) {
    CAPTURE(tc.in);
    const std::string message = parse_error(tc.in);
    CHECK(message.rfind("time: ", 0) == 0);
    CHECK(message.find(tc.expect) != std::string::npos);
  }
}

TEST_CASE("parse_go_duration words its errors as Go does") {
  CHECK(parse_error("1") == R"(time: missing unit in duration "1")");
  CHECK(parse_error("x") == R"(time: invalid duration "x")");
  CHECK(parse_error("1d") == R"(time: unknown unit "d" in duration "1d")");
  CHECK(parse_error("") == R"(time: invalid duration "")");
  CHECK(parse_error("1.") == R"(time: missing unit in duration "1.")");
  CHECK(parse_error("1h 2m") == R"(time: unknown unit "h " in duration "1h 2m")");
  CHECK(parse_error("1\xC2\xB5") == R"(time: unknown unit "\xc2\xb5" in duration "1\xc2\xb5")");
  CHECK(parse_error("3000000h") == R"(time: invalid duration "3000000h")");
  CHECK(parse_error("1\"\\s") == R"(time: unknown unit "\"\\s" in duration "1\"\\s")");
  CHECK_THROWS_AS(parse_go_duration("--1s"), std::invalid_argument);
  CHECK_THROWS_AS(parse_go_duration("1s-1s"), std::invalid_argument);
}

TEST_CASE("parse_go_duration rejects a sum that reaches 2^64") {
  // Go's uint64 accumulator wraps here and returns 0; an overflow must not parse.
  CHECK(parse_error("9223372036854775808ns9223372036854775808ns") ==
        R"(time: invalid duration "9223372036854775808ns9223372036854775808ns")");
  CHECK(parse_error("-9223372036854775808ns1ns") != "");
  CHECK(parse_go_duration("-9223372036854775807ns1ns").count() == kMin);
}

TEST_CASE("format_go_duration matches Go's durationTests") {
  for (const auto& tc : kDurationTests) {
    CAPTURE(tc.str);
    CHECK(format_go_duration(nanoseconds{tc.d}) == tc.str);
    if (tc.d > 0) CHECK(format_go_duration(nanoseconds{-tc.d}) == std::string("-") + tc.str);
  }
}

TEST_CASE("Go duration strings round-trip") {
  // As Go's TestParseDurationRoundTrip: the extremes, then millisecond-resolution values.
  CHECK(parse_go_duration(format_go_duration(nanoseconds{kMax})).count() == kMax);
  CHECK(parse_go_duration(format_go_duration(nanoseconds{kMin})).count() == kMin);
  std::uint32_t x = 12345;
  for (int i = 0; i < 100; ++i) {
    x = x * 1664525u + 1013904223u;  // a fixed LCG keeps the test deterministic
    const nanoseconds d{static_cast<std::int64_t>(x >> 1) * Millisecond};
    CAPTURE(format_go_duration(d));
    CHECK(parse_go_duration(format_go_duration(d)) == d);
  }
  for (const auto& tc : kDurationTests) {
    CHECK(parse_go_duration(tc.str).count() == tc.d);
  }
}
