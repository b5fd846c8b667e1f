#pragma once
// What etcd's JSON gateway answers, decoded and checked: pure functions from the bytes of a reply
// to plain structs, so that no field a recipe relies on counts before it is checked, and so that
// they can be tested and fuzzed without a server. A reply that does not fit throws
// MalformedReply saying what is wrong with it ("create_revision missing"); the client puts the
// server and the operation in front.
//
// The gateway (measured on etcd 3.4) sends 64-bit numbers as strings, leaves out every field
// whose value is zero, and writes keys and values in base64.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/errors.hpp"
#include "util/error.hpp"
#include "util/printable.hpp"

namespace lk {

// A decimal int64 with an optional '-', nothing else: nullopt for anything else or out of range.
std::optional<std::int64_t> parse_int64(std::string_view text);

// A number field of a gateway object: 0 when left out; MalformedReply when it is not a number.
std::int64_t etcd_int(const nlohmann::json& object, const char* field);
// The same for a field that must be above 0: MalformedReply when missing, 0 or negative.
std::int64_t etcd_positive(const nlohmann::json& object, const char* field);

struct KeyValue {
  std::string key, value;
  std::int64_t create_revision = 0;
  std::int64_t lease = 0;
  std::int64_t mod_revision = 0;  // for a deleted key in a watch event, the deletion's
};
KeyValue etcd_kv(const nlohmann::json& kv);  // decodes key and value; checks the numbers' form

// A status the gateway reports instead of a result: in the body of a failed unary call, or as
// the "error" of a line of a stream.
struct EtcdStatus {
  int code = 0;  // gRPC's: 5 NotFound, 14 Unavailable
  std::string message;
};
// The status of a failed call, as well as its body tells (never throws: it is already a failure).
EtcdStatus decode_status(std::string_view body);

// A reply that is nothing but a JSON object with a header: the header's revision.
std::int64_t decode_header(std::string_view body);

struct LeaseGrant {
  std::int64_t id = 0;   // above 0
  std::int64_t ttl = 0;  // seconds, above 0
};
LeaseGrant decode_lease_grant(std::string_view body);

struct KeepAlive {
  std::optional<EtcdStatus> error;  // the stream failed instead of answering
  std::int64_t ttl = 0;             // 0: etcd no longer has the lease
};
KeepAlive decode_keepalive(std::string_view body, std::int64_t lease);

struct RangeReply {
  std::int64_t revision = 0;  // the store's, as of the read
  std::vector<KeyValue> kvs;  // each with a create revision above 0
};
// `key` and `range_end` are what was asked: every key returned must lie in [key, range_end), or
// be `key` itself when `range_end` is empty.
RangeReply decode_range(std::string_view body, const std::string& key,
                        const std::string& range_end = "");

// For a range asked for in create-revision order: who holds is read off that order, so a reply
// out of it must not count.
void check_create_order(const std::vector<KeyValue>& kvs);
// A read made newest first (sort_order DESCEND by CREATE), turned oldest first; MalformedReply
// when it was not in that order.
void oldest_first(std::vector<KeyValue>& newest_first);

// What our put-if-absent transaction (etcd_recipe.cpp) found: the put, or nothing when our key
// was there already, followed in both branches by a read of the queue [queue_from, queue_end)
// newest first (after our put: the newest keys, ours first; else the whole queue), which must
// hold our key, on our lease. The queue comes back oldest first.
struct QueuedKey {
  bool created = false;  // this transaction's put created our key
  std::int64_t create_revision = 0;
  RangeReply queue;  // in create-revision order; its revision is the transaction's
};
QueuedKey decode_queue_txn(std::string_view body, const std::string& key, std::int64_t lease,
                           const std::string& queue_from, const std::string& queue_end);

struct WatchEvent {
  bool deleted = false;
  KeyValue kv;
  std::optional<KeyValue> prev_kv;  // when asked for and the key existed
};
struct WatchMessage {
  std::optional<EtcdStatus> error;  // the stream failed
  std::int64_t revision = 0;
  bool created = false, canceled = false;
  std::int64_t compact_revision = 0;  // above 0 when cancelled because history was compacted
  std::string cancel_reason;
  std::vector<WatchEvent> events;
};
// One line of a watch stream.
WatchMessage decode_watch_message(std::string_view line);

// The token of a successful login.
std::string decode_auth_token(std::string_view body);

// A stream's lines, fed as chunks arrive: each byte is looked at once, and no line may grow past
// `max_line` (the gateway writes one JSON object per line; etcd's own limit on a request is
// 1.5 MiB, so a longer line is a server gone wrong, not one to buffer without end).
constexpr std::size_t kMaxStreamLine = 2 << 20;

class LineSplitter {
 public:
  explicit LineSplitter(std::size_t max_line = kMaxStreamLine) : max_line_(max_line) {}
  // The lines `chunk` completes, without their '\n'. MalformedReply once a line passes the cap.
  std::vector<std::string> feed(std::string_view chunk);
  std::size_t pending() const { return partial_.size(); }

 private:
  std::size_t max_line_;
  std::string partial_;
};

}  // namespace lk
