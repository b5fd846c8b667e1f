#include <doctest/doctest.h>

#include "backend/consul/consul_layout.hpp"

using namespace lk;

namespace {
KvPair pair(std::string key, std::string value, std::string session, std::uint64_t flags,
            std::uint64_t modify = 7) {
  KvPair p;
  p.key = std::move(key);
  p.value = std::move(value);
  p.session = std::move(session);
  p.flags = flags;
  p.modify_index = modify;
  return p;
}
}  // namespace

TEST_CASE("the semaphore's .lock is written as Consul's Go client writes it") {
  SemaphoreState s{3, {{"b-session", true}, {"a-session", true}}, 0};
  CHECK(encode_semaphore(s) == R"({"Limit":3,"Holders":{"a-session":true,"b-session":true}})");
  CHECK(encode_semaphore({2, {}, 0}) == R"({"Limit":2,"Holders":{}})");
}

TEST_CASE("reading a semaphore prunes holders whose session holds no key any more") {
  std::vector<KvPair> pairs = {
      pair("p/.lock", R"({"Limit":2,"Holders":{"live":true,"dead":true}})", "", kSemaphoreFlags, 9),
      pair("p/live", "", "live", kSemaphoreFlags),
      pair("p/waiting", "", "waiting", kSemaphoreFlags)};
  SemaphoreState s = read_semaphore(pairs, "p", 2);
  CHECK(s.limit == 2);
  CHECK(s.modify_index == 9);
  CHECK(s.holders == std::map<std::string, bool>{{"live", true}});
}

TEST_CASE("a missing or empty .lock is a free semaphore of our limit") {
  CHECK(read_semaphore({}, "p", 4).limit == 4);
  CHECK(read_semaphore({}, "p", 4).modify_index == 0);
  CHECK(read_semaphore({pair("p/.lock", "", "", kSemaphoreFlags)}, "p", 4).holders.empty());
}

TEST_CASE("conflicts in Consul's words") {
  CHECK_THROWS_WITH(read_semaphore({pair("p/.lock", "", "s", kLockFlags)}, "p", 2),
                    "Existing key does not match semaphore use");
  CHECK_THROWS_WITH(
      read_semaphore({pair("p/.lock", R"({"Limit":2,"Holders":{}})", "", kSemaphoreFlags)}, "p", 3),
      "semaphore limit conflict (lock: 2, local: 3)");
  CHECK_THROWS_WITH(check_lock_flags(pair("p/.lock", "", "", kSemaphoreFlags)),
                    "Existing key does not match lock use");
  CHECK_NOTHROW(check_lock_flags(pair("p/.lock", "", "", kLockFlags)));
}

TEST_CASE("a Limit that is not a number of slots is another's key, never a library's complaint") {
  for (const char* value : {R"({"Limit":"2","Holders":{}})", R"({"Limit":2.5})", R"({"Limit":-1})",
                            R"({"Limit":99999999999})", R"({"Limit":[2]})"}) {
    CAPTURE(value);
    CHECK_THROWS_WITH(read_semaphore({pair("p/.lock", value, "", kSemaphoreFlags)}, "p", 2),
                      "Existing key does not match semaphore use");
    CHECK(semaphore_limit(value) == 0);
  }
  CHECK(semaphore_limit(R"({"Limit":3,"Holders":{}})") == 3);
  CHECK(semaphore_limit("not json") == 0);
  CHECK(semaphore_limit("") == 0);
}

TEST_CASE("a semaphore lists its own keys, not those of a longer prefix") {
  CHECK(semaphore_keys("svc/web") == "svc/web/");
}
