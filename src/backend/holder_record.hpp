#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lk {

// Who holds (or waits for) a prefix, stored beside the hold so that others can be told.
struct HolderRecord {
  std::string prefix;
  std::string name;  // the session name
  std::string host;
  pid_t pid = 0;
  std::string since;        // RFC 3339, UTC
  std::uint64_t token = 0;  // fencing token; 0 while waiting
  std::string until;        // RFC 3339, UTC: -min-hold keeps the hold until then, the child gone
  std::string value;        // what a holder stored instead of a record: -value's, or a peer's data

  // `t` as RFC 3339, in UTC, to the second.
  static std::string utc_text(std::chrono::system_clock::time_point t);

  static HolderRecord for_this_process(const std::string& prefix, const std::string& name);
  // A text field that is not UTF-8 also gets "<field>_base64", its exact bytes, which from_json
  // prefers: any bytes come back as they were (see util/json_text.hpp).
  std::string to_json() const;
  static HolderRecord from_json(const std::string& text);  // throws Error when malformed
  // What a peer stored beside its hold: a record of lock's, or, for anything else (consul lock
  // and etcdctl store nothing, -value may be anything), named(prefix, value, unnamed).
  static HolderRecord from_value(const std::string& prefix, const std::string& value,
                                 const std::string& unnamed);
  // `value` with "until" set, when it is a record of this process's (a value of -value is the
  // user's, and stays as it is); its other fields, such as ZooKeeper's limit, are kept.
  static std::optional<std::string> with_until(const std::string& value, const std::string& until);
  // A holder known only by what it stored (its value: -value's is the leader's address to its
  // standbys), named `unnamed` (escaped where shown, like every name).
  static HolderRecord named(const std::string& prefix, const std::string& value,
                            const std::string& unnamed);
  // Whether it says who: a record with no pid and no host was not written yet, or is unreadable,
  // or another program's.
  bool says_who() const { return pid != 0 || !host.empty(); }
  // "pid 12 on web1 since 2024-05-06T07:08:09Z" for a message, escaped; a record that does not
  // say who says so instead of "pid 0 on  since".
  std::string who() const;
};

// A holder record with its semaphore's limit and -value, as one JSON object: the data of lock's
// ZooKeeper nodes, and the comment that ends each of lock's PostgreSQL statements.
struct LimitedRecord {
  HolderRecord record;
  int limit = 1;
};
std::string limited_record_json(const HolderRecord& record, int limit);
// nullopt for anything else: another program's bytes, a record without a limit.
std::optional<LimitedRecord> parse_limited_record(std::string_view text);

}  // namespace lk
