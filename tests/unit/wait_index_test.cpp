#include <doctest/doctest.h>

#include "backend/consul/wait_index.hpp"

using namespace lk;
using std::chrono::milliseconds;

namespace {
constexpr milliseconds at_once{0};
constexpr milliseconds blocked{15000};
}  // namespace

TEST_CASE("a first read waits on its index, at once") {
  WaitIndex w(1);
  CHECK(w.index() == 0);
  CHECK(w.answered(42, 1, at_once) == milliseconds(0));
  CHECK(w.index() == 42);
}

TEST_CASE("progress: a higher index with other entries, and no pause") {
  WaitIndex w(1);
  w.answered(42, 1, at_once);
  CHECK(w.answered(50, 2, milliseconds(300)) == milliseconds(0));
  CHECK(w.index() == 50);
}

TEST_CASE("a query that blocked until its wait ended is no sign of a loop") {
  WaitIndex w(1);
  w.answered(42, 1, at_once);
  for (int i = 0; i < 10; ++i) CHECK(w.answered(42, 1, blocked) == milliseconds(0));
  CHECK(w.index() == 42);
}

TEST_CASE("an unchanged index at once: pauses that double up to a second, jittered") {
  WaitIndex w(7);
  w.answered(42, 1, at_once);
  milliseconds bound = WaitIndex::kFirstPause;
  for (int i = 0; i < 10; ++i) {
    milliseconds pause = w.answered(42, 1, at_once);
    CHECK(pause >= bound / 2);
    CHECK(pause <= bound);
    bound = std::min(bound * 2, WaitIndex::kMaxPause);
  }
  CHECK(w.index() == 42);
}

TEST_CASE("a higher index with nothing changed is no progress either") {
  WaitIndex w(3);
  w.answered(42, 1, at_once);
  milliseconds total(0);
  for (std::uint64_t i = 43; i < 53; ++i) total += w.answered(i, 1, at_once);
  CHECK(total >= milliseconds(2000));  // 25..50, 50..100, ... then 500..1000 each
  CHECK(w.index() == 52);
}

TEST_CASE("an index that goes backwards starts over from 0, and is paced") {
  WaitIndex w(5);
  w.answered(42, 1, at_once);
  milliseconds pause = w.answered(30, 1, at_once);
  CHECK(pause >= WaitIndex::kFirstPause / 2);
  CHECK(w.index() == 0);
  CHECK(w.answered(30, 1, at_once) == milliseconds(0));  // the fresh read itself answers at once
  CHECK(w.index() == 30);
  CHECK(w.answered(20, 1, at_once) >= WaitIndex::kFirstPause);  // the pauses keep growing
}

TEST_CASE("an index of 0 is never waited on") {
  WaitIndex w(5);
  w.answered(0, 1, at_once);
  CHECK(w.index() == 1);
  CHECK(w.answered(0, 1, at_once) > milliseconds(0));  // from 1 back to 0: backwards
  CHECK(w.index() == 0);
}

TEST_CASE("the time a query took counts toward its pause") {
  WaitIndex w(9);
  w.answered(42, 1, at_once);
  CHECK(w.answered(42, 1, milliseconds(49)) <= milliseconds(1));
  CHECK(w.answered(42, 1, milliseconds(999)) == milliseconds(0));
}

TEST_CASE("progress brings the pause back to its first") {
  WaitIndex w(11);
  w.answered(42, 1, at_once);
  for (int i = 0; i < 6; ++i) w.answered(42, 1, at_once);
  CHECK(w.answered(43, 2, at_once) == milliseconds(0));
  CHECK(w.answered(43, 2, at_once) <= WaitIndex::kFirstPause);
}

TEST_CASE("failures read afresh, pacing, and honour Retry-After up to a cap") {
  WaitIndex w(13);
  w.answered(42, 1, at_once);
  CHECK(w.failed() <= WaitIndex::kFirstPause);
  CHECK(w.index() == 0);
  CHECK(w.failed(std::chrono::seconds(2)) == milliseconds(2000));
  CHECK(w.failed(std::chrono::seconds(60)) == milliseconds(5000));
  // After a failure the next read compares with nothing: its entries count as news.
  w.answered(42, 1, at_once);
  CHECK(w.answered(43, 2, at_once) == milliseconds(0));
}

TEST_CASE("a stalled step reads afresh after a pause that grows") {
  WaitIndex w(17);
  w.answered(42, 1, at_once);
  milliseconds first = w.stalled();
  CHECK(w.index() == 0);
  CHECK(first <= WaitIndex::kFirstPause);
  CHECK(w.stalled() >= WaitIndex::kFirstPause);
}

TEST_CASE("the fingerprint sees holders and indexes change") {
  KvPair a;
  a.key = "p/.lock";
  a.session = "s1";
  a.lock_index = 1;
  a.modify_index = 5;
  KvPair b = a;
  CHECK(fingerprint({a}) == fingerprint({b}));
  b.session = "s2";
  CHECK(fingerprint({a}) != fingerprint({b}));
  b = a;
  b.modify_index = 6;
  CHECK(fingerprint({a}) != fingerprint({b}));
  CHECK(fingerprint({}) != fingerprint({a}));
  KvPair c = a, d = a;
  c.key = "ab";
  c.session = "c";
  d.key = "a";
  d.session = "bc";
  CHECK(fingerprint({c}) != fingerprint({d}));
}
