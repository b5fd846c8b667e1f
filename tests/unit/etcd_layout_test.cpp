#include <doctest/doctest.h>

#include "backend/etcd/etcd_layout.hpp"
#include "backend/lease/lease_keeper.hpp"

using namespace lk;

namespace {
Contender at(std::int64_t revision, int limit = 1) {
  return {"p/" + std::string(limit == 1 ? "" : "sem" + std::to_string(limit) + "-") +
              std::to_string(revision),
          revision, limit, ""};
}
}  // namespace

TEST_CASE("contender keys: etcd's mutex layout for locks, the limit in the name for semaphores") {
  CHECK(contender_key("jobs/a", 0x694d7c3e5a1b2c0d, 1) == "jobs/a/694d7c3e5a1b2c0d");
  CHECK(contender_key("jobs/a", 0x1f, 3) == "jobs/a/sem3-1f");
  CHECK(parse_contender("jobs/a", {"jobs/a/sem3-1f", "", 7})->limit == 3);
  CHECK(parse_contender("jobs/a", {"jobs/a/694d7c3e5a1b2c0d", "", 7})->limit == 1);
  // Whatever else lies directly under the prefix counts as a lock's key, as etcdctl sees it.
  CHECK(parse_contender("jobs/a", {"jobs/a/sem", "", 7})->limit == 1);
  CHECK(parse_contender("jobs/a", {"jobs/a/sem1-1f", "", 7})->limit == 1);
  CHECK(parse_contender("jobs/a", {"jobs/a/semx-1f", "", 7})->limit == 1);
  // Keys of a longer prefix are not contenders.
  CHECK_FALSE(parse_contender("jobs/a", {"jobs/a/b/694d", "", 7}));
  CHECK_FALSE(parse_contender("jobs/a", {"jobs", "", 7}));
  CHECK_FALSE(parse_contender("jobs/a", {"jobs/ab/1", "", 7}));
}

TEST_CASE("position: contenders ahead by create revision, and the one just ahead") {
  std::vector<Contender> q = {at(3, 2), at(5, 2), at(9, 2), at(12, 2)};
  Position p = position_in(q, 9, 2);
  CHECK(p.ahead == 2);
  CHECK(p.predecessor->create_revision == 5);
  CHECK(position_in(q, 3, 2).ahead == 0);
  CHECK_FALSE(position_in(q, 3, 2).predecessor);
}

TEST_CASE("conflicts ahead use Consul's wording; conflicts behind are the newcomer's to see") {
  CHECK_THROWS_WITH(position_in({at(3, 2), at(5)}, 5, 1),
                    "Existing key does not match lock use (p/sem2-3 is a semaphore's)");
  CHECK_THROWS_WITH(position_in({at(3), at(5, 2)}, 5, 2),
                    "Existing key does not match semaphore use (p/3 is a lock's)");
  CHECK_THROWS_WITH(position_in({at(3, 2), at(5, 3)}, 5, 3),
                    "semaphore limit conflict (lock: 2, local: 3)");
  CHECK(position_in({at(3), at(5, 2)}, 3, 1).ahead == 0);
}
