#include "backend/etcd/etcd_reply.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "util/base64.hpp"

namespace lk {

using nlohmann::json;

namespace {

json parse_object(std::string_view body) {
  json reply = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (reply.is_discarded()) throw MalformedReply("not JSON");
  if (!reply.is_object()) throw MalformedReply("not a JSON object");
  return reply;
}

// The object under `field`, or an empty one when it is left out; MalformedReply when it is
// something else.
const json& object_at(const json& parent, const char* field) {
  static const json empty = json::object();
  auto it = parent.find(field);
  if (it == parent.end() || it->is_null()) return empty;
  if (!it->is_object()) throw MalformedReply(fmt::format("{} is not an object", field));
  return *it;
}

const json& array_at(const json& parent, const char* field) {
  static const json empty = json::array();
  auto it = parent.find(field);
  if (it == parent.end() || it->is_null()) return empty;
  if (!it->is_array()) throw MalformedReply(fmt::format("{} is not a list", field));
  return *it;
}

std::string string_at(const json& parent, const char* field) {
  auto it = parent.find(field);
  if (it == parent.end() || it->is_null()) return "";
  if (!it->is_string()) throw MalformedReply(fmt::format("{} is not a string", field));
  return it->get<std::string>();
}

bool bool_at(const json& parent, const char* field) {
  auto it = parent.find(field);
  if (it == parent.end() || it->is_null()) return false;
  if (!it->is_boolean()) throw MalformedReply(fmt::format("{} is not true or false", field));
  return it->get<bool>();
}

std::int64_t header_revision(const json& reply) {
  return etcd_positive(object_at(reply, "header"), "revision");
}

// A stream's {"error": {...}} (grpc-gateway's wording: grpc_code, http_code, message).
std::optional<EtcdStatus> stream_error(const json& line) {
  auto it = line.find("error");
  if (it == line.end() || it->is_null()) return std::nullopt;
  EtcdStatus s;
  if (it->is_object()) {
    s.code = static_cast<int>(etcd_int(*it, "grpc_code"));
    s.message = printable(string_at(*it, "message"));
  } else if (it->is_string()) {
    s.message = printable(it->get<std::string>());
  }
  if (s.message.empty()) s.message = "the stream failed";
  return s;
}

std::string hex(std::int64_t n) { return fmt::format("{:x}", n); }

}  // namespace

std::optional<std::int64_t> parse_int64(std::string_view text) {
  std::int64_t n = 0;
  const char* end = text.data() + text.size();
  if (text.empty() || text.front() == '+') return std::nullopt;
  auto [stop, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc() || stop != end) return std::nullopt;
  return n;
}

std::int64_t etcd_int(const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return 0;
  if (it->is_string()) {
    if (auto n = parse_int64(it->get_ref<const std::string&>())) return *n;
  } else if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<std::uint64_t>() > INT64_MAX)
      throw MalformedReply(fmt::format("{} is out of range", field));
    return it->get<std::int64_t>();
  }
  throw MalformedReply(fmt::format("{} is not a whole number", field));
}

std::int64_t etcd_positive(const json& object, const char* field) {
  std::int64_t n = etcd_int(object, field);
  // The gateway leaves zero values out, so a 0 and a missing field read the same.
  if (n == 0) throw MalformedReply(fmt::format("{} missing or 0", field));
  if (n < 0) throw MalformedReply(fmt::format("{} is negative ({})", field, n));
  return n;
}

KeyValue etcd_kv(const json& kv) {
  if (!kv.is_object()) throw MalformedReply("a key-value is not an object");
  auto decode = [&](const char* field) {
    auto bytes = base64_decode(string_at(kv, field));
    if (!bytes) throw MalformedReply(fmt::format("{} is not base64", field));
    return *bytes;
  };
  KeyValue out{decode("key"), decode("value"), etcd_int(kv, "create_revision"),
               etcd_int(kv, "lease"), etcd_int(kv, "mod_revision")};
  if (out.create_revision < 0) throw MalformedReply("create_revision is negative");
  if (out.mod_revision < 0) throw MalformedReply("mod_revision is negative");
  return out;
}

EtcdStatus decode_status(std::string_view body) {
  EtcdStatus s;
  json reply = json::parse(body, nullptr, false);
  if (reply.is_object()) {
    auto code = reply.find("code");
    if (code != reply.end() && code->is_number_integer()) s.code = code->get<int>();
    for (const char* field : {"message", "error"}) {
      auto it = reply.find(field);
      if (it != reply.end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
        s.message = printable(it->get<std::string>());
        break;
      }
    }
    if (s.message.empty()) {
      try {
        if (auto e = stream_error(reply)) s = *e;
      } catch (const MalformedReply&) {
        // Not even a stream's error: the status line says all there is.
      }
    }
  } else {
    s.message = printable(body);
  }
  return s;
}

std::int64_t decode_header(std::string_view body) { return header_revision(parse_object(body)); }

LeaseGrant decode_lease_grant(std::string_view body) {
  json reply = parse_object(body);
  if (auto error = string_at(reply, "error"); !error.empty())
    throw MalformedReply("error: " + printable(error));
  header_revision(reply);
  return {etcd_positive(reply, "ID"), etcd_positive(reply, "TTL")};
}

KeepAlive decode_keepalive(std::string_view body, std::int64_t lease) {
  json reply = parse_object(body);
  KeepAlive out;
  if ((out.error = stream_error(reply))) return out;
  auto it = reply.find("result");
  if (it == reply.end() || !it->is_object()) throw MalformedReply("result missing");
  const json& result = *it;
  header_revision(result);
  // The ID is left out only when it is 0, which no lease has: so it must be ours.
  if (std::int64_t id = etcd_int(result, "ID"); id != lease)
    throw MalformedReply(fmt::format("it is for lease {}, not ours ({})", hex(id), hex(lease)));
  out.ttl = etcd_int(result, "TTL");
  if (out.ttl < 0) throw MalformedReply(fmt::format("TTL is negative ({})", out.ttl));
  return out;
}

namespace {

// The keys of a range reply (`range`, at the store's `revision`), each checked against what was
// asked: see decode_range.
std::vector<KeyValue> keys_in(const json& range, std::int64_t revision, const std::string& key,
                              const std::string& range_end) {
  std::vector<KeyValue> out;
  for (const json& item : array_at(range, "kvs")) {
    KeyValue kv = etcd_kv(item);
    bool inside = range_end.empty()
                      ? kv.key == key
                      : kv.key >= key && (range_end == std::string(1, '\0') || kv.key < range_end);
    if (!inside)
      throw MalformedReply("it names key " + printable(kv.key) + ", which was not asked for");
    if (kv.create_revision <= 0) throw MalformedReply("create_revision missing or 0");
    if (kv.create_revision > revision)
      throw MalformedReply(fmt::format("create_revision {} is past the store's revision {}",
                                       kv.create_revision, revision));
    out.push_back(std::move(kv));
  }
  return out;
}

}  // namespace

void check_create_order(const std::vector<KeyValue>& kvs) {
  for (std::size_t i = 1; i < kvs.size(); ++i)
    if (kvs[i].create_revision <= kvs[i - 1].create_revision)
      throw MalformedReply("keys out of create-revision order");
}

void oldest_first(std::vector<KeyValue>& newest_first) {
  std::reverse(newest_first.begin(), newest_first.end());
  check_create_order(newest_first);
}

QueuedKey decode_queue_txn(std::string_view body, const std::string& key, std::int64_t lease,
                           const std::string& queue_from, const std::string& queue_end) {
  json reply = parse_object(body);
  QueuedKey out;
  out.queue.revision = header_revision(reply);
  out.created = bool_at(reply, "succeeded");
  const json& responses = array_at(reply, "responses");
  // Both branches end with the read of the queue; the success branch starts with the put.
  if (responses.size() != (out.created ? 2u : 1u))
    throw MalformedReply(
        fmt::format("{} responses where {} were asked for", responses.size(), out.created ? 2 : 1));
  if (out.created && !responses[0].is_object())
    throw MalformedReply("the put's response is not an object");
  if (out.created && !responses[0].contains("response_put"))
    throw MalformedReply("the put's response missing");
  if (!responses.back().is_object()) throw MalformedReply("the read's response is not an object");
  auto range = responses.back().find("response_range");
  if (range == responses.back().end() || !range->is_object())
    throw MalformedReply("the read's response missing");
  out.queue.kvs = keys_in(*range, out.queue.revision, queue_from, queue_end);
  oldest_first(out.queue.kvs);
  auto ours = [&](const KeyValue& kv) { return kv.key == key; };
  auto mine = std::find_if(out.queue.kvs.begin(), out.queue.kvs.end(), ours);
  if (mine == out.queue.kvs.end()) throw MalformedReply("our key is not in the queue read");
  if (std::count_if(mine, out.queue.kvs.end(), ours) > 1)
    throw MalformedReply("our key is in the queue read twice");
  out.create_revision = mine->create_revision;
  if (mine->lease != lease)
    throw MalformedReply(fmt::format("our key is attached to lease {}, not ours ({})",
                                     hex(mine->lease), hex(lease)));
  // Our put is the transaction's one write, so it created the key at the revision it made.
  if (out.created && out.create_revision != out.queue.revision)
    throw MalformedReply(fmt::format("create_revision {} is not the revision {} of our put",
                                     out.create_revision, out.queue.revision));
  return out;
}

RangeReply decode_range(std::string_view body, const std::string& key,
                        const std::string& range_end) {
  json reply = parse_object(body);
  RangeReply out;
  out.revision = header_revision(reply);
  out.kvs = keys_in(reply, out.revision, key, range_end);
  return out;
}

WatchMessage decode_watch_message(std::string_view line) {
  json message = parse_object(line);
  WatchMessage out;
  if ((out.error = stream_error(message))) return out;
  auto it = message.find("result");
  if (it == message.end() || !it->is_object()) throw MalformedReply("result missing");
  const json& result = *it;
  out.revision = header_revision(result);
  out.created = bool_at(result, "created");
  out.canceled = bool_at(result, "canceled");
  out.compact_revision = etcd_int(result, "compact_revision");
  if (out.compact_revision < 0) throw MalformedReply("compact_revision is negative");
  out.cancel_reason = printable(string_at(result, "cancel_reason"));
  for (const json& e : array_at(result, "events")) {
    if (!e.is_object()) throw MalformedReply("an event is not an object");
    std::string type = string_at(e, "type");
    if (type != "" && type != "PUT" && type != "DELETE")
      throw MalformedReply("an event of type " + printable(type));
    auto kv = e.find("kv");
    if (kv == e.end() || !kv->is_object()) throw MalformedReply("an event without its key");
    WatchEvent event{type == "DELETE", etcd_kv(*kv), std::nullopt};
    if (auto prev = e.find("prev_kv"); prev != e.end() && !prev->is_null())
      event.prev_kv = etcd_kv(*prev);
    out.events.push_back(std::move(event));
  }
  return out;
}

std::string decode_auth_token(std::string_view body) {
  std::string token = string_at(parse_object(body), "token");
  if (token.empty()) throw MalformedReply("token missing");
  // It goes into a header line: a control character would end or split it.
  for (unsigned char c : token)
    if (c < 0x20 || c == 0x7f) throw MalformedReply("the token has control characters");
  return token;
}

std::vector<std::string> LineSplitter::feed(std::string_view chunk) {
  std::vector<std::string> lines;
  for (std::size_t eol; (eol = chunk.find('\n')) != std::string_view::npos;) {
    if (partial_.size() + eol > max_line_) break;
    partial_.append(chunk.substr(0, eol));
    lines.push_back(std::move(partial_));
    partial_.clear();
    chunk.remove_prefix(eol + 1);
  }
  if (partial_.size() + std::min(chunk.size(), max_line_ + 1) > max_line_)
    throw MalformedReply(
        max_line_ % (1 << 20)
            ? fmt::format("a line of the stream is longer than {} bytes", max_line_)
            : fmt::format("a line of the stream is longer than {} MiB", max_line_ >> 20));
  partial_.append(chunk);
  return lines;
}

}  // namespace lk
