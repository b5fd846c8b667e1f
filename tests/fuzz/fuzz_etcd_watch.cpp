// -status -watch on etcd: a range read, then watch messages, applied to EtcdPrefixView.
//
// Input: lines. The first is the body of the range read of prefix "p" (read afresh as empty, at
// revision 1, when it does not decode); each line after it is a watch message, skipped when it
// does not decode. After each message the view's status must be what a plain model of the
// prefix gives (a key put replaces the one of that name, a deletion removes it, and nothing the
// read saw already is applied again), its holders within the limit and every contender shown once.
#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "backend/etcd/etcd_prefix_view.hpp"
#include "fuzz_check.hpp"

namespace {

const std::string kPrefix = "p";

struct Model {
  std::map<std::string, lk::Contender> keys;
  std::int64_t read_at = 0;

  void apply(const lk::WatchEvent& e) {
    if (e.kv.mod_revision <= read_at) return;
    if (e.deleted)
      keys.erase(e.kv.key);
    else if (auto c = lk::parse_contender(kPrefix, e.kv))
      keys[c->key] = *c;
  }
  lk::PrefixStatus status() const {
    std::vector<lk::Contender> queue;
    for (const auto& [key, c] : keys) queue.push_back(c);
    std::sort(queue.begin(), queue.end(), [](const lk::Contender& a, const lk::Contender& b) {
      return std::tie(a.create_revision, a.key) < std::tie(b.create_revision, b.key);
    });
    return lk::status_of_queue(kPrefix, queue);
  }
};

std::string shown(const lk::PrefixStatus& s) {
  std::string out = std::to_string(s.limit) + ":";
  for (const auto* list : {&s.holders, &s.waiters}) {
    for (const lk::HolderRecord& r : *list) out += " " + std::to_string(r.token) + "/" + r.name + "/" + r.value;
    out += " |";
  }
  return fuzz::shown(out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start <= input.size();) {
    std::size_t end = std::min(input.find('\n', start), input.size());
    lines.push_back(input.substr(start, end - start));
    start = end + 1;
  }
  lk::EtcdPrefixView view(kPrefix);
  Model model;
  std::vector<lk::Contender> read;
  model.read_at = 1;
  try {
    lk::RangeReply r = lk::decode_range(lines[0], kPrefix + "/", kPrefix + "0");
    for (const lk::KeyValue& kv : r.kvs)
      if (auto c = lk::parse_contender(kPrefix, kv)) read.push_back(*c);
    model.read_at = r.revision;
  } catch (const lk::MalformedReply&) {
  }
  for (const lk::Contender& c : read) model.keys[c.key] = c;
  view.reset(read, model.read_at);
  for (std::size_t i = 1; i < lines.size(); ++i) {
    lk::WatchMessage m;
    try {
      m = lk::decode_watch_message(lines[i]);
    } catch (const lk::MalformedReply&) {
      continue;
    }
    for (const lk::WatchEvent& e : m.events) {
      view.apply(e);
      model.apply(e);
    }
    lk::PrefixStatus got = view.status(), want = model.status();
    FUZZ_CHECK_MSG(shown(got) == shown(want), shown(got) + " != " + shown(want));
    FUZZ_CHECK(got.holders.size() <= static_cast<std::size_t>(std::max(got.limit, 0)));
    FUZZ_CHECK(got.holders.size() + got.waiters.size() == model.keys.size());
    FUZZ_CHECK(view.revision() >= model.read_at);
  }
  return 0;
}
