#include <doctest/doctest.h>

#include <limits>
#include <string_view>

#include "backend/zookeeper/zk_layout.hpp"

using namespace lk;
using Names = std::vector<std::string>;

TEST_CASE("zookeeper: protected names as Curator makes and finds them") {
  std::string id = new_protection_id();
  // Java's UUID.randomUUID() text: 8-4-4-4-12 lower-case hex, version 4, IETF variant.
  REQUIRE(id.size() == 36);
  for (std::size_t i = 0; i < id.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) CHECK(id[i] == '-');
    else CHECK(std::string_view("0123456789abcdef").find(id[i]) != std::string_view::npos);
  }
  CHECK(id[14] == '4');
  CHECK(std::string_view("89ab").find(id[19]) != std::string_view::npos);
  CHECK(new_protection_id() != id);
  CHECK(protected_name(id, kLockName) == "_c_" + id + "-lock-");
  Names children{"_c_other-lock-0000000001", "_c_" + id + "-lock-0000000002", "lock-0000000003"};
  CHECK(find_protected(children, id) == "_c_" + id + "-lock-0000000002");
  CHECK_FALSE(find_protected(children, "missing"));
  // The id must be followed by its dash: a longer id is another one.
  CHECK_FALSE(find_protected({"_c_" + id + "0-lock-0000000001"}, id));
  CHECK(zk_path("a/b") == "/a/b");
}

TEST_CASE("zookeeper: contenders in Curator's order, by the text after the last lock-") {
  Names children{"_c_b-lock-0000000010",
                 "_c_a-lock-0000000002",
                 "lock-0000000001",
                 "_c_x-lock-lock-0000000003",
                 "locks",
                 "leases"};
  CHECK(curator_sorted(children, kLockName) == Names{"lock-0000000001", "_c_a-lock-0000000002",
                                                     "_c_x-lock-lock-0000000003",
                                                     "_c_b-lock-0000000010", "leases", "locks"});
  CHECK(curator_sorted({"_c_q-lease-0000000001", "_c_p-lease-0000000000"}, kLeaseName) ==
        Names{"_c_p-lease-0000000000", "_c_q-lease-0000000001"});
  // Names without the marker sort whole, and ties keep their order.
  CHECK(curator_sorted({"b", "a", "b"}, kLockName) == Names{"a", "b", "b"});
}

TEST_CASE("zookeeper: node data is lock's holder record with its limit, or someone else's") {
  HolderRecord r = HolderRecord::for_this_process("svc/web", "web\n1");
  auto parsed = parse_node_data(node_data(r, 3));
  REQUIRE(parsed);
  CHECK(parsed->limit == 3);
  CHECK(parsed->record.name == "web\n1");
  CHECK(parsed->record.prefix == "svc/web");
  CHECK(parsed->record.pid == r.pid);
  // Any limit -n takes comes back.
  CHECK(parse_node_data(node_data(r, std::numeric_limits<int>::max()))->limit ==
        std::numeric_limits<int>::max());
  // Curator's nodes carry the client's address; other programs, anything.
  CHECK_FALSE(parse_node_data("127.0.0.1"));
  CHECK_FALSE(parse_node_data(""));
  CHECK_FALSE(parse_node_data("{"));
  CHECK_FALSE(parse_node_data("{\"limit\": 2}"));  // no record
  CHECK_FALSE(parse_node_data(
      R"({"limit": 0, "pid": 1, "token": 0, "prefix": "p", "name": "", "host": "h", "since": ""})"));
  CHECK_FALSE(parse_node_data(
      R"({"limit": "2", "pid": 1, "token": 0, "prefix": "p", "name": "", "host": "h", "since": ""})"));
  CHECK(
      parse_node_data(
          R"({"limit": 2, "pid": 1, "token": 0, "prefix": "p", "name": "", "host": "h", "since": ""})")
          ->limit == 2);
}
