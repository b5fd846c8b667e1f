#include <doctest/doctest.h>

#include <string>

#include "backend/consul/consul_reply.hpp"

using namespace lk;

namespace {
constexpr const char* kId = "adf4238a-882b-9ddc-4a9d-5b6758e4159e";

// The message a malformed reply throws, or "" when it decoded.
template <class F>
std::string refusal(F decode) {
  try {
    decode();
  } catch (const MalformedReply& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("a session ID is a UUID, nothing else") {
  CHECK(is_session_id(kId));
  CHECK(is_session_id("ADF4238A-882B-9DDC-4A9D-5B6758E4159E"));
  CHECK_FALSE(is_session_id(""));
  CHECK_FALSE(is_session_id("../../kv/x"));
  CHECK_FALSE(is_session_id("adf4238a-882b-9ddc-4a9d-5b6758e4159"));    // one short
  CHECK_FALSE(is_session_id("adf4238a-882b-9ddc-4a9d-5b6758e4159ee"));  // one long
  CHECK_FALSE(is_session_id("adf4238a-882b-9ddc-4a9d-5b6758e4159g"));   // not hex
  CHECK_FALSE(is_session_id("adf4238a/882b-9ddc-4a9d-5b6758e4159e"));   // no dash
  CHECK_FALSE(is_session_id("adf4238a-882b-9ddc-4a9d-5b6758e4159e\n"));
  CHECK_FALSE(is_session_id("../../kv/x/aaaaaaaaaaaaaaaaaaaaaaaaa"));  // 36 bytes, not a UUID
}

TEST_CASE("session create: the ID is checked before it is used") {
  CHECK(decode_session_create(std::string(R"({"ID":")") + kId + R"("})") == kId);
  CHECK(refusal([] { decode_session_create(R"({"ID":"../../kv/x"})"); }) ==
        "session ID \"../../kv/x\" is not a UUID");
  CHECK(refusal([] { decode_session_create(R"({"ID":""})"); }) == "session ID \"\" is not a UUID");
  CHECK(refusal([] { decode_session_create(R"({})"); }) == "ID missing");
  CHECK(refusal([] { decode_session_create(R"({"ID":5})"); }) == "ID is not a string");
  CHECK(refusal([] { decode_session_create("<html>"); }) == "not a JSON object");
  CHECK(refusal([] { decode_session_create(""); }) == "not a JSON object");
  CHECK(refusal([] { decode_session_create(R"(["x"])"); }) == "not a JSON object");
}

TEST_CASE("X-Consul-Index is a decimal number, never a library's complaint") {
  CHECK(decode_index("0") == 0);
  CHECK(decode_index("42") == 42);
  CHECK(decode_index("18446744073709551615") == 18446744073709551615ull);
  CHECK(refusal([] { decode_index(""); }) == "X-Consul-Index missing");
  CHECK(refusal([] { decode_index("abc"); }) ==
        "X-Consul-Index \"abc\" is not a whole number from 0 up");
  CHECK(refusal([] { decode_index("-1"); }) != "");
  CHECK(refusal([] { decode_index("+1"); }) != "");
  CHECK(refusal([] { decode_index("1.5"); }) != "");
  CHECK(refusal([] { decode_index("12 "); }) != "");
  CHECK(refusal([] { decode_index("18446744073709551616"); }) != "");  // one past the top
}

TEST_CASE("a KV list decodes into pairs") {
  auto pairs = decode_kv_list(
      R"([{"LockIndex":3,"Key":"p/.lock","Flags":3304740253564472344,"Value":"aGk=",)"
      R"("Session":"s1","CreateIndex":5,"ModifyIndex":9},)"
      R"({"LockIndex":0,"Key":"p/x","Flags":16210313421097356768,"Value":null,"CreateIndex":6,"ModifyIndex":6}])",
      "p/", true);
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[0].key == "p/.lock");
  CHECK(pairs[0].value == "hi");
  CHECK(pairs[0].session == "s1");
  CHECK(pairs[0].flags == 3304740253564472344ull);
  CHECK(pairs[0].lock_index == 3);
  CHECK(pairs[0].modify_index == 9);
  CHECK(pairs[1].value == "");
  CHECK(pairs[1].session == "");
  CHECK(pairs[1].flags == 16210313421097356768ull);
  CHECK(decode_kv_list("[]", "p/", true).empty());
}

TEST_CASE("a KV list that does not fit is refused, saying why") {
  auto list = [](std::string body, std::string key = "p/.lock", bool recurse = false) {
    return refusal([&] { decode_kv_list(body, key, recurse); });
  };
  CHECK(list("not json") == "not a JSON array of entries");
  CHECK(list(R"({"Key":"p/.lock"})") == "not a JSON array of entries");
  CHECK(list(R"([5])") == "an entry is not a JSON object");
  CHECK(list(R"([{"ModifyIndex":1}])") == "Key missing");
  CHECK(list(R"([{"Key":7,"ModifyIndex":1}])") == "Key is not a string");
  CHECK(list(R"([{"Key":"other","ModifyIndex":1}])") == "key 'other' was not asked for");
  CHECK(list(R"([{"Key":"q/x","ModifyIndex":1}])", "p/", true) == "key 'q/x' was not asked for");
  CHECK(list(R"([{"Key":"p/.lock","Value":"%%%","ModifyIndex":1}])") ==
        "the value of 'p/.lock' is not base64");
  CHECK(list(R"([{"Key":"p/.lock","Value":5,"ModifyIndex":1}])") == "Value is not a string");
  CHECK(list(R"([{"Key":"p/.lock"}])") == "ModifyIndex missing");
  CHECK(list(R"([{"Key":"p/.lock","ModifyIndex":0}])") == "ModifyIndex 0 for 'p/.lock'");
  CHECK(list(R"([{"Key":"p/.lock","ModifyIndex":-1}])") ==
        "ModifyIndex is not a whole number from 0 up");
  CHECK(list(R"([{"Key":"p/.lock","ModifyIndex":1.5}])") ==
        "ModifyIndex is not a whole number from 0 up");
  CHECK(list(R"([{"Key":"p/.lock","ModifyIndex":"1"}])") ==
        "ModifyIndex is not a whole number from 0 up");
  CHECK(list(R"([{"Key":"p/.lock","Flags":true,"ModifyIndex":1}])") ==
        "Flags is not a whole number from 0 up");
  CHECK(list(R"([{"Key":"p/.lock","Session":["s"],"ModifyIndex":1}])") ==
        "Session is not a string");
  CHECK(list(R"([{"Key":"p/.lock","Session":"s","LockIndex":0,"ModifyIndex":1}])") ==
        "LockIndex 0 for 'p/.lock', which a session holds");
  CHECK(list(R"([{"Key":"p/.lock","ModifyIndex":1},{"Key":"p/.lock","ModifyIndex":2}])") ==
        "more than one entry for one key");
  CHECK(list(R"([{"Key":"p/\u001b[0m","ModifyIndex":1}])", "p/", false) ==
        "key 'p/\\x1b[0m' was not asked for");
}

TEST_CASE("a KV write answers true or false, and nothing else counts") {
  CHECK(decode_bool("true"));
  CHECK(decode_bool("true\n"));
  CHECK_FALSE(decode_bool("false"));
  CHECK(refusal([] { decode_bool(""); }) == "\"\" where true or false was expected");
  CHECK(refusal([] { decode_bool("truely"); }) == "\"truely\" where true or false was expected");
  CHECK(refusal([] { decode_bool("1"); }) != "");
}

TEST_CASE("session info and renew replies") {
  std::string one = std::string(R"([{"ID":")") + kId + R"(","Behavior":"release","TTL":"15s"}])";
  auto s = decode_session_info(one, kId);
  REQUIRE(s);
  CHECK(s->behavior == "release");
  CHECK(s->ttl == "15s");
  CHECK_FALSE(decode_session_info("[]", kId));
  CHECK_FALSE(decode_session_info("null", kId));
  CHECK(refusal([&] { decode_session_info(one, "00000000-0000-0000-0000-000000000000"); }) ==
        std::string("session \"") + kId + "\" was not asked for");
  CHECK(refusal([] { decode_session_info("{}", kId); }) == "not a JSON array of sessions");
  CHECK(refusal([] { decode_session_info("[1]", kId); }) == "the session is not a JSON object");
  CHECK(refusal([] { decode_session_info("[{}]", kId); }) == "ID missing");
  CHECK(refusal([] { decode_session_info("[{},{}]", kId); }) == "more than one session");
}
