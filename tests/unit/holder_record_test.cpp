// HolderRecord is what a slot file says about its holder: one JSON line that other lock
// processes read back to tell a waiting user who holds the prefix.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <string>

#include "backend/holder_record.hpp"
#include "util/error.hpp"

using lk::HolderRecord;

namespace {

HolderRecord sample() {
  HolderRecord r;
  r.prefix = "service/web";
  r.name = "lock for 'echo hi' at 'service/web'";
  r.host = "web1";
  r.pid = 4242;
  r.since = "2024-05-06T07:08:09Z";
  r.token = 17;
  return r;
}

void check_same(const HolderRecord& a, const HolderRecord& b) {
  CHECK(a.prefix == b.prefix);
  CHECK(a.name == b.name);
  CHECK(a.host == b.host);
  CHECK(a.pid == b.pid);
  CHECK(a.since == b.since);
  CHECK(a.token == b.token);
}

// The Error message from_json throws for `text`, or "" when it parses.
std::string parse_error(const std::string& text) {
  try {
    HolderRecord::from_json(text);
  } catch (const lk::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("to_json writes one JSON line with every field") {
  std::string json = sample().to_json();
  CHECK(json == R"({"host":"web1","name":"lock for 'echo hi' at 'service/web'","pid":4242,)"
                R"("prefix":"service/web","since":"2024-05-06T07:08:09Z","token":17})"
                "\n");
  CHECK(json.find('\n') == json.size() - 1);
}

TEST_CASE("to_json and from_json round-trip") {
  check_same(HolderRecord::from_json(sample().to_json()), sample());
}

TEST_CASE("a default record round-trips") {
  check_same(HolderRecord::from_json(HolderRecord().to_json()), HolderRecord());
}

TEST_CASE("special characters round-trip and stay on one line") {
  HolderRecord r = sample();
  r.name = "quote \" backslash \\ newline \n tab \t nul " + std::string(1, '\0') + " end";
  r.prefix = "caf\xc3\xa9/\xe2\x98\x83";
  r.host = "";
  std::string json = r.to_json();
  CHECK(json.find('\n') == json.size() - 1);
  check_same(HolderRecord::from_json(json), r);
}

TEST_CASE("extreme numbers round-trip") {
  HolderRecord r = sample();
  r.token = std::numeric_limits<std::uint64_t>::max();
  r.pid = std::numeric_limits<pid_t>::max();
  check_same(HolderRecord::from_json(r.to_json()), r);
}

TEST_CASE("from_json accepts the fields in any order, with spaces and extra fields") {
  HolderRecord r = HolderRecord::from_json(
      "  { \"token\": 3, \"since\": \"s\", \"pid\": 9, \"host\": \"h\", \"name\": \"n\",\n"
      "    \"prefix\": \"p\", \"future\": [1, 2] }\n");
  CHECK(r.prefix == "p");
  CHECK(r.name == "n");
  CHECK(r.host == "h");
  CHECK(r.pid == 9);
  CHECK(r.since == "s");
  CHECK(r.token == 3);
}

TEST_CASE("for_this_process describes this process now, with no token yet") {
  HolderRecord r = HolderRecord::for_this_process("a/b", "job");
  CHECK(r.prefix == "a/b");
  CHECK(r.name == "job");
  CHECK(r.pid == getpid());
  CHECK_FALSE(r.host.empty());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  CHECK(r.host == host);
  CHECK(r.token == 0);
  // RFC 3339 in UTC, to the second: 2024-05-06T07:08:09Z
  REQUIRE(r.since.size() == 20);
  CHECK(r.since[4] == '-');
  CHECK(r.since[7] == '-');
  CHECK(r.since[10] == 'T');
  CHECK(r.since[13] == ':');
  CHECK(r.since[16] == ':');
  CHECK(r.since[19] == 'Z');
  check_same(HolderRecord::from_json(r.to_json()), r);
}

TEST_CASE("malformed records throw lk::Error with a message") {
  const std::string cases[] = {
      "",
      "\n",
      "not json",
      "{",
      R"({"prefix":"p","name":"n","host":"h","pid":1,"since":"s","token":1)",  // cut short
      "null",
      "[]",
      "42",
      R"("a string")",
      "{}",
      R"({"name":"n","host":"h","pid":1,"since":"s","token":1})",       // no prefix
      R"({"prefix":"p","host":"h","pid":1,"since":"s","token":1})",     // no name
      R"({"prefix":"p","name":"n","pid":1,"since":"s","token":1})",     // no host
      R"({"prefix":"p","name":"n","host":"h","since":"s","token":1})",  // no pid
      R"({"prefix":"p","name":"n","host":"h","pid":1,"token":1})",      // no since
      R"({"prefix":"p","name":"n","host":"h","pid":1,"since":"s"})",    // no token
      R"({"prefix":1,"name":"n","host":"h","pid":1,"since":"s","token":1})",
      R"({"prefix":"p","name":null,"host":"h","pid":1,"since":"s","token":1})",
      R"({"prefix":"p","name":"n","host":"h","pid":"1","since":"s","token":1})",
      R"({"prefix":"p","name":"n","host":"h","pid":1,"since":"s","token":"1"})",
      R"({"prefix":"p","name":"n","host":"h","pid":1,"since":2,"token":1})",
      R"({"prefix":"p","name":"n","host":"h","pid":1,"since":"s","token":true})",
      R"({"prefix":"p","name":"n","host":"h","pid":1,"since":"s","token":1} trailing)",
  };
  for (const auto& text : cases) {
    CAPTURE(text);
    CHECK_THROWS_AS(HolderRecord::from_json(text), lk::Error);
    const std::string message = parse_error(text);
    CHECK(message.rfind("malformed holder record: ", 0) == 0);
    CHECK(message.size() > std::string("malformed holder record: ").size());
  }
}

TEST_CASE("a record cut short at any point is refused, never half-read") {
  // A reader can see a slot file while its holder is still writing it.
  const std::string json = sample().to_json();
  const std::size_t body = json.size() - 1;  // without the newline
  for (std::size_t n = 0; n < body; ++n) {
    CAPTURE(n);
    CHECK_THROWS_AS(HolderRecord::from_json(json.substr(0, n)), lk::Error);
  }
}

// The name comes from -name or the child's words and the prefix from the command line: any
// bytes a user can type, not only UTF-8. A record must still be written for them, and read back
// as they were.
TEST_CASE("names, prefixes and hosts that are not UTF-8 round-trip exactly") {
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte += static_cast<char>(c);
  const std::string cases[] = {
      every_byte,
      std::string(1, '\xff'),  // not = "\xff": GCC 12 warns (-Wrestrict) at -O3
      "lock for 'printf \xff' at 'p'",
      "lone \x80 continuation \xbf bytes",
      "overlong \xc0\xaf slash, \xe0\x80\xaf and \xf0\x80\x80\xaf",
      "surrogate \xed\xa0\x80, past U+10FFFF \xf4\x90\x80\x80",
      "cut short \xe2\x98",
      "caf\xc3\xa9 then \xe9 alone",
  };
  for (const auto& bytes : cases) {
    CAPTURE(bytes);
    for (std::string HolderRecord::*field :
         {&HolderRecord::prefix, &HolderRecord::name, &HolderRecord::host}) {
      HolderRecord r = sample();
      r.*field = bytes;
      const std::string json = r.to_json();
      CHECK(json.find('\n') == json.size() - 1);
      check_same(HolderRecord::from_json(json), r);
    }
  }
}

TEST_CASE("text that is not UTF-8 is written as before, its exact bytes beside it in base64") {
  HolderRecord r = sample();
  r.name = std::string("job \xff", 5);
  r.host = std::string(1, '\xc0');
  CHECK(r.to_json() ==
        "{\"host\":\"\xef\xbf\xbd\",\"host_base64\":\"wA==\",\"name\":\"job \xef\xbf\xbd\","
        "\"name_base64\":\"am9iIP8=\",\"pid\":4242,\"prefix\":\"service/web\","
        "\"since\":\"2024-05-06T07:08:09Z\",\"token\":17}\n");
}

TEST_CASE("a record of UTF-8 text has no _base64 fields") {
  HolderRecord r = sample();
  r.name = "caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x94\x92, and a C1 control \xc2\x85";
  r.prefix = "\xe6\x97\xa5\xe6\x9c\xac/\xd0\xb4";
  r.host = "";
  const std::string json = r.to_json();
  CHECK(json.find("_base64") == std::string::npos);
  check_same(HolderRecord::from_json(json), r);
}

TEST_CASE("the exact bytes in <field>_base64 win over the text beside them") {
  HolderRecord r = HolderRecord::from_json(
      R"({"prefix":"p","prefix_base64":"/w==","name":"?","name_base64":"bmFtZQ==","host":"h",)"
      R"("host_base64":"","pid":1,"since":"s","since_base64":"AHM=","token":2})");
  CHECK(r.prefix == std::string(1, '\xff'));
  CHECK(r.name == "name");
  CHECK(r.host == "");
  CHECK(r.since == std::string("\0s", 2));
}

TEST_CASE("a _base64 field that is not a string of base64 is refused in our words") {
  const std::string head = R"({"prefix":"p","name":"n","host":"h","pid":1,"since":"s","token":1,)";
  CHECK(parse_error(head + R"("name_base64":42})") ==
        "malformed holder record: name_base64 is not a string");
  CHECK(parse_error(head + R"("prefix_base64":null})") ==
        "malformed holder record: prefix_base64 is not a string");
  CHECK(parse_error(head + R"("host_base64":"%%%"})") ==
        "malformed holder record: host_base64 is not base64");
  CHECK(parse_error(head + R"("since_base64":"Zm9"})") ==
        "malformed holder record: since_base64 is not base64");
  // The text beside it is still required, as the writer always puts it there.
  CHECK(parse_error(R"({"prefix":"p","name_base64":"bg==","host":"h","pid":1,"since":"s",)"
                    R"("token":1})") == "malformed holder record: name missing");
}

TEST_CASE("a malformed record is described in plain words, not the JSON library's") {
  CHECK(parse_error("not json") == "malformed holder record: not JSON");
  CHECK(parse_error("[]") == "malformed holder record: not a JSON object");
  CHECK(parse_error(R"({"prefix":"p"})") == "malformed holder record: name missing");
  CHECK(parse_error(R"({"prefix":"p","name":"n","host":"h","pid":"1","since":"s","token":1})") ==
        "malformed holder record: pid is not a whole number");
  CHECK(parse_error(
            R"({"prefix":"p","name":"n","host":"h","pid":1099511627776,"since":"s","token":1})") ==
        "malformed holder record: pid is out of range");
  CHECK(parse_error(R"({"prefix":"p","name":"n","host":"h","pid":1,"since":"s","token":-1})") ==
        "malformed holder record: token is out of range");
}

TEST_CASE("until: written only when set, and read back; older records have none") {
  HolderRecord r = sample();
  CHECK(sample().to_json().find("until") == std::string::npos);
  r.until = "2024-05-06T07:09:09Z";
  CHECK(HolderRecord::from_json(r.to_json()).until == r.until);
  CHECK(HolderRecord::from_json(sample().to_json()).until.empty());
  CHECK(r.who() ==
        "pid 4242 on web1 since 2024-05-06T07:08:09Z, held until 2024-05-06T07:09:09Z (-min-hold)");
}

TEST_CASE("utc_text: RFC 3339 in UTC, to the second") {
  using namespace std::chrono;
  CHECK(HolderRecord::utc_text(system_clock::time_point(seconds(0))) == "1970-01-01T00:00:00Z");
  CHECK(HolderRecord::utc_text(system_clock::time_point(seconds(1715000000) + milliseconds(999))) ==
        "2024-05-06T12:53:20Z");
}

TEST_CASE("with_until: only a record of this process's gets it, its other fields kept") {
  HolderRecord mine = sample();
  mine.pid = getpid();
  auto written = HolderRecord::with_until(mine.to_json(), "2024-05-06T07:09:09Z");
  REQUIRE(written);
  CHECK(written->back() == '\n');
  CHECK(HolderRecord::from_json(*written).until == "2024-05-06T07:09:09Z");
  check_same(HolderRecord::from_json(*written), mine);
  // ZooKeeper's node data: the record and the limit, on no line of its own.
  std::string node = mine.to_json();
  node.pop_back();
  node.back() = ',';
  node += "\"limit\":2}";
  auto with_limit = HolderRecord::with_until(node, "2024-05-06T07:09:09Z");
  REQUIRE(with_limit);
  CHECK(with_limit->find("\"limit\":2") != std::string::npos);
  CHECK(with_limit->back() == '}');
  // Another process's record, -value's text, nothing.
  HolderRecord theirs = sample();
  theirs.pid = getpid() + 1;
  CHECK_FALSE(HolderRecord::with_until(theirs.to_json(), "2024-05-06T07:09:09Z"));
  CHECK_FALSE(HolderRecord::with_until("leader at 10.0.0.1:8080", "2024-05-06T07:09:09Z"));
  CHECK_FALSE(HolderRecord::with_until("", "2024-05-06T07:09:09Z"));
}
