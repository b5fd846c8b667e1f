// What the ZooKeeper backend reads from the server (zk_layout.hpp): node data written by any
// client, and the child lists of a lock's or a semaphore's nodes.
//
// Input: one byte naming the function (d r l e n p; any other byte picks one by its value), a
// line of tab-separated arguments, then the body:
//   d  parse_node_data(body)              data of a node: lock's holder record with "limit",
//                                         Curator's address bytes, anything another client wrote
//   r  node_data(record, limit) -> parse_node_data: a record built from the body (NUL-separated
//      prefix, name, host, since; then pid, token and limit as raw bytes), any bytes a user can
//      type and any limit -n takes (1 to INT_MAX), must come back exactly
//   l  curator_sorted(children, "lock-")  children: the body split at NUL (a C client's names
//   e  curator_sorted(children, "lease-")   are C strings, so any other byte may be in one)
//   n  curator_sorted(children, name)     argument: name
//   p  find_protected(children, id)       argument: id (empty: a fixed UUID)
//
// Invariants. parse_node_data never throws; what it accepts has a positive limit, a who() of one
// printable line, and comes back unchanged through node_data -> parse_node_data (and node_data
// writes one line of UTF-8 JSON). What lock writes is what it reads: node_data of any record and
// any limit is accepted back, or lock users would take each other for Curator. curator_sorted returns a permutation of its input,
// ordered by the key Curator sorts by (the text after the last `name`, or the whole child when
// it has none: StandardLockInternalsDriver.fixForSorting), stable among equal keys, and sorting
// its result again changes nothing. find_protected returns one of the children, starting with
// "_c_<id>-", the first such; nothing when there is none.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/zookeeper/zk_layout.hpp"
#include "fuzz_check.hpp"

namespace {

using lk::HolderRecord;
using lk::NodeOwner;

constexpr std::string_view kUuid = "6e7cecdd-6c3a-4a97-9d34-b19bbc7df5cf";

bool same(const HolderRecord& a, const HolderRecord& b) {
  return a.prefix == b.prefix && a.name == b.name && a.host == b.host && a.pid == b.pid &&
         a.since == b.since && a.token == b.token;
}

std::string describe(const NodeOwner& o) {
  const HolderRecord& r = o.record;
  return "prefix " + fuzz::shown(r.prefix) + " name " + fuzz::shown(r.name) + " host " +
         fuzz::shown(r.host) + " pid " + std::to_string(r.pid) + " since " + fuzz::shown(r.since) +
         " token " + std::to_string(r.token) + " limit " + std::to_string(o.limit);
}

std::optional<NodeOwner> parse(std::string_view data) {
  try {
    return lk::parse_node_data(data);
  } catch (const std::exception& e) {
    fuzz::fail("parse_node_data never throws", fuzz::shown(data) + ": " + e.what(), __FILE__, __LINE__);
  } catch (...) {
    fuzz::fail("parse_node_data never throws", fuzz::shown(data), __FILE__, __LINE__);
  }
}

// What parse_node_data accepted must survive the way back: node_data, then parse_node_data.
void round_trip(const NodeOwner& owner) {
  FUZZ_CHECK_MSG(owner.limit >= 1, describe(owner));
  std::string who = owner.record.who();
  FUZZ_CHECK_MSG(fuzz::printable_line(who) && who.size() <= 512, fuzz::shown(who));
  std::string data;
  try {
    data = lk::node_data(owner.record, owner.limit);
  } catch (const std::exception& e) {
    fuzz::fail("node_data writes any record", describe(owner) + ": " + e.what(), __FILE__, __LINE__);
  }
  // One line of JSON, UTF-8, that parse_node_data looks at (it must start with '{').
  FUZZ_CHECK_MSG(data.starts_with('{') && data.find('\n') == std::string::npos && fuzz::utf8(data),
                 fuzz::shown(data));
  auto again = parse(data);
  FUZZ_CHECK_MSG(again.has_value(), describe(owner) + " written as " + fuzz::shown(data) + " was refused");
  FUZZ_CHECK_MSG(same(again->record, owner.record) && again->limit == owner.limit,
                 describe(owner) + " came back as " + describe(*again));
  FUZZ_CHECK(lk::node_data(again->record, again->limit) == data);
}

void check_data(std::string_view data) {
  if (auto owner = parse(data)) {
    // Only lock's own data counts: a JSON object with a whole-number limit.
    FUZZ_CHECK_MSG(data.starts_with('{'), fuzz::shown(data));
    round_trip(*owner);
  }
}

void check_record(std::string_view bytes) {
  NodeOwner owner;
  auto limit = fuzz::take_tail<std::uint32_t>(bytes);
  auto pid_token = fuzz::take_tail<std::array<std::int64_t, 2>>(bytes);
  auto fields = fuzz::split(bytes, '\0');
  fields.resize(4);
  HolderRecord& r = owner.record;
  r.prefix = fields[0];
  r.name = fields[1];
  r.host = fields[2];
  r.since = fields[3];
  r.pid = static_cast<pid_t>(pid_token[0]);
  r.token = static_cast<std::uint64_t>(pid_token[1]);
  owner.limit = static_cast<int>(1 + limit % INT_MAX);  // what -n takes
  round_trip(owner);
}

std::vector<std::string> children_of(std::string_view body) {
  if (body.empty()) return {};
  return fuzz::split(body, '\0');
}

// Curator's key, written out again: the text after the last `name`, or the whole child.
std::string_view key_of(std::string_view child, std::string_view name) {
  auto at = child.rfind(name);
  return at == std::string_view::npos ? child : child.substr(at + name.size());
}

void check_sorted(const std::vector<std::string>& children, std::string_view name) {
  std::vector<std::string> sorted = lk::curator_sorted(children, name);
  FUZZ_CHECK_MSG(sorted.size() == children.size(),
                 std::to_string(children.size()) + " children, " + std::to_string(sorted.size()) + " sorted");
  // Which input each output is: the k-th copy of a name in the output is its k-th in the input
  // (copies are indistinguishable, so this is the only mapping stability can be judged by).
  std::map<std::string, std::vector<std::size_t>> where;
  for (std::size_t i = 0; i < children.size(); ++i) where[children[i]].push_back(i);
  std::map<std::string, std::size_t> used;
  std::vector<std::size_t> origin;
  for (const auto& child : sorted) {
    auto it = where.find(child);
    FUZZ_CHECK_MSG(it != where.end(), "not among the children: " + fuzz::shown(child));
    std::size_t& k = used[child];
    FUZZ_CHECK_MSG(k < it->second.size(), "more copies than given: " + fuzz::shown(child));
    origin.push_back(it->second[k++]);
  }
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    std::string_view a = key_of(sorted[i - 1], name), b = key_of(sorted[i], name);
    FUZZ_CHECK_MSG(a <= b, "out of order: " + fuzz::shown(sorted[i - 1]) + " before " + fuzz::shown(sorted[i]) +
                               " (name " + fuzz::shown(name) + ")");
    if (a == b)
      FUZZ_CHECK_MSG(origin[i - 1] < origin[i], "not stable: " + fuzz::shown(sorted[i - 1]) + " (child " +
                                                    std::to_string(origin[i - 1]) + ") before " +
                                                    fuzz::shown(sorted[i]) + " (child " +
                                                    std::to_string(origin[i]) + ")");
  }
  FUZZ_CHECK(lk::curator_sorted(sorted, name) == sorted);
}

void check_protected(const std::vector<std::string>& children, const std::string& id) {
  const std::string start = "_c_" + id + "-";
  auto first = std::find_if(children.begin(), children.end(),
                            [&](const std::string& c) { return c.starts_with(start); });
  auto found = lk::find_protected(children, id);
  if (first == children.end()) {
    FUZZ_CHECK_MSG(!found, "found " + fuzz::shown(*found) + " for id " + fuzz::shown(id));
    return;
  }
  FUZZ_CHECK_MSG(found.has_value(), "missed " + fuzz::shown(*first) + " for id " + fuzz::shown(id));
  FUZZ_CHECK_MSG(found->starts_with(start), fuzz::shown(*found) + " for id " + fuzz::shown(id));
  FUZZ_CHECK_MSG(*found == *first, fuzz::shown(*found) + " is not the first, " + fuzz::shown(*first));
  // And what protected_name() asks the server for is found by its id, whatever follows it.
  FUZZ_CHECK(lk::protected_name(id, lk::kLockName).starts_with(start));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  auto op = fuzz::operation(data, size, "drlenp");
  switch (op.op) {
    case 'd':
      check_data(op.body);
      break;
    case 'r':
      check_record(op.body);
      break;
    case 'l':
      check_sorted(children_of(op.body), lk::kLockName);
      break;
    case 'e':
      check_sorted(children_of(op.body), lk::kLeaseName);
      break;
    case 'n':
      check_sorted(children_of(op.body), op.args[0]);
      break;
    case 'p':
      check_protected(children_of(op.body), op.args[0].empty() ? std::string(kUuid) : op.args[0]);
      break;
  }
  return 0;
}
