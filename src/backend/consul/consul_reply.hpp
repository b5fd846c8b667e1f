#pragma once
// What Consul's HTTP API answers, decoded and checked: pure functions from the bytes of a reply
// to plain structs, so that no field a recipe relies on counts before it is checked, and so that
// they can be tested and fuzzed without a server. A reply that does not fit throws
// MalformedReply saying what is wrong with it ("ModifyIndex missing"); the client puts the
// agent and the operation in front.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/errors.hpp"
#include "util/error.hpp"
#include "util/printable.hpp"

namespace lk {

// A session ID as Consul makes them: a UUID, 8-4-4-4-12 hex digits. Anything else must never
// reach a URL (an ID of "../../kv/x" would address a key once dot segments are normalised).
bool is_session_id(std::string_view id);

// The X-Consul-Index header of a read: a decimal number. Empty means missing; both are errors.
std::uint64_t decode_index(std::string_view header);

struct KvPair {
  std::string key, value, session;
  std::uint64_t flags = 0, lock_index = 0, modify_index = 0;
};

// A GET /v1/kv/<key> reply body: a JSON array of entries, each with a Key that is `key` itself
// (or, with `recurse`, starts with it), a base64 Value or null, and its indexes. A key held by a
// session has a LockIndex above 0, and every entry a ModifyIndex above 0.
std::vector<KvPair> decode_kv_list(std::string_view body, std::string_view key, bool recurse);

// The answer of a KV write (acquire, release, check-and-set, delete): true or false.
bool decode_bool(std::string_view body);

// PUT /v1/session/create: {"ID": "<uuid>"}; the ID, checked with is_session_id.
std::string decode_session_create(std::string_view body);

// A session as /v1/session/info and /v1/session/renew describe it.
struct SessionInfo {
  std::string id, behavior, ttl;
};
// Their reply body, a JSON array with at most one session; nullopt when it is empty (the
// session is gone). The session must be `id`.
std::optional<SessionInfo> decode_session_info(std::string_view body, std::string_view id);

}  // namespace lk
