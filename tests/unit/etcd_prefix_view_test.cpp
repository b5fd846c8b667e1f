#include <doctest/doctest.h>

#include <map>
#include <random>

#include "backend/etcd/etcd_prefix_view.hpp"

using namespace lk;

namespace {

// A store with etcd's revisions: each transaction is one revision; a key written again keeps its
// create revision; a deletion's event carries the revision that deleted it.
struct Store {
  std::map<std::string, KeyValue> keys;
  std::int64_t revision = 1;
  std::vector<std::vector<WatchEvent>> history;  // the events of each transaction, in order

  void commit(const std::vector<std::pair<std::string, std::optional<std::string>>>& writes) {
    ++revision;
    std::vector<WatchEvent> events;
    for (const auto& [key, value] : writes) {
      if (!value) {
        if (!keys.erase(key)) continue;
        events.push_back({true, {key, "", 0, 0, revision}, std::nullopt});
        continue;
      }
      auto found = keys.find(key);
      KeyValue kv{key, *value, found == keys.end() ? revision : found->second.create_revision, 7,
                  revision};
      keys[key] = kv;
      events.push_back({false, kv, std::nullopt});
    }
    history.push_back(events);
  }
  std::vector<Contender> queue() const {
    std::vector<Contender> q;
    for (const auto& [key, kv] : keys)
      if (auto c = parse_contender("p", kv)) q.push_back(*c);
    std::sort(q.begin(), q.end(),
              [](auto& a, auto& b) { return a.create_revision < b.create_revision; });
    return q;
  }
};

std::string shown(const PrefixStatus& s) {
  std::string out = std::to_string(s.limit);
  for (const auto& r : s.holders) out += " h" + std::to_string(r.token) + r.name + r.value;
  for (const auto& r : s.waiters) out += " w" + std::to_string(r.token) + r.name + r.value;
  return out;
}

}  // namespace

TEST_CASE(
    "-status -watch on etcd: the view, from any read on, goes through every state of the store") {
  const char* keys[] = {"p/sem2-1", "p/sem2-2", "p/sem2-3", "p/sem2-4", "p/a/nested", "p/5"};
  for (unsigned seed = 0; seed < 200; ++seed) {
    std::minstd_rand random(seed);
    auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
    Store store;
    std::optional<EtcdPrefixView> view;
    for (int step = 0; step < 40; ++step) {
      if (!view && pick(8) == 0) {  // the read; every transaction after it comes as events
        view.emplace("p");
        view->reset(store.queue(), store.revision);
        store.history.clear();
      }
      std::vector<std::pair<std::string, std::optional<std::string>>> writes;
      for (int n = 1 + pick(2); n > 0; --n) {  // some transactions write two keys
        std::string key = keys[pick(6)];
        writes.emplace_back(key, pick(3) == 0
                                     ? std::nullopt
                                     : std::optional<std::string>("v" + std::to_string(step)));
      }
      store.commit(writes);
      if (!view) continue;
      for (const WatchEvent& e : store.history.back()) view->apply(e);
      CAPTURE(seed);
      CAPTURE(step);
      REQUIRE(shown(view->status()) == shown(status_of_queue("p", store.queue())));
      if (!store.history.back().empty()) CHECK(view->revision() == store.revision);
    }
  }
}

TEST_CASE("-status -watch on etcd: an event the read already saw changes nothing") {
  EtcdPrefixView view("p");
  view.reset({{"p/1", 3, 1, "a"}}, 5);
  view.apply({true, {"p/1", "", 0, 0, 4}, std::nullopt});  // older than the read
  CHECK(view.status().holders.size() == 1);
  CHECK(view.revision() == 5);
  view.apply({true, {"p/1", "", 0, 0, 6}, std::nullopt});
  CHECK(view.status().holders.empty());
  CHECK(view.status().limit == 0);
  CHECK(view.revision() == 6);
}

TEST_CASE("the status of a queue: the first contender's limit, and that many hold") {
  PrefixStatus s = status_of_queue(
      "p", {{"p/sem2-a", 3, 2, ""}, {"p/sem2-b", 4, 2, ""}, {"p/sem2-c", 9, 2, "x"}});
  CHECK(s.limit == 2);
  REQUIRE(s.holders.size() == 2);
  CHECK(s.holders[0].token == 3);
  REQUIRE(s.waiters.size() == 1);
  CHECK(s.waiters[0].value == "x");
  CHECK(status_of_queue("p", {}).limit == 0);
}
