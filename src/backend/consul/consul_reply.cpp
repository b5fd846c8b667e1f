#include "backend/consul/consul_reply.hpp"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "util/base64.hpp"

namespace lk {

using nlohmann::json;

namespace {

[[noreturn]] void malformed(const std::string& what) { throw MalformedReply(what); }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t'))
    s.remove_suffix(1);
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\n' || s.front() == '\r' || s.front() == '\t'))
    s.remove_prefix(1);
  return s;
}

// Never throws: a body that is not JSON comes back discarded.
json parse(std::string_view body) { return json::parse(body.begin(), body.end(), nullptr, false); }

// An unsigned field of an entry: `fallback` when left out, an error when it is anything but a
// whole number from 0 up (Go's encoding/json would refuse it as well).
std::uint64_t number(const json& object, const char* field, std::optional<std::uint64_t> fallback) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) {
    if (!fallback) malformed(fmt::format("{} missing", field));
    return *fallback;
  }
  if (!it->is_number_unsigned())
    malformed(fmt::format("{} is not a whole number from 0 up", field));
  return it->get<std::uint64_t>();
}

std::string text_field(const json& object, const char* field, bool required) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) {
    if (required) malformed(fmt::format("{} missing", field));
    return "";
  }
  if (!it->is_string()) malformed(fmt::format("{} is not a string", field));
  return it->get<std::string>();
}

}  // namespace

bool is_session_id(std::string_view id) {
  if (id.size() != 36) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    char c = id[i];
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (dash ? c != '-' : !hex) return false;
  }
  return true;
}

std::uint64_t decode_index(std::string_view header) {
  if (header.empty()) malformed("X-Consul-Index missing");
  std::uint64_t index = 0;
  auto [end, error] = std::from_chars(header.data(), header.data() + header.size(), index);
  if (error != std::errc() || end != header.data() + header.size())
    malformed(fmt::format("X-Consul-Index \"{}\" is not a whole number from 0 up",
                          printable(header, 40)));
  return index;
}

std::vector<KvPair> decode_kv_list(std::string_view body, std::string_view key, bool recurse) {
  json j = parse(body);
  if (!j.is_array()) malformed("not a JSON array of entries");
  std::vector<KvPair> pairs;
  for (const json& e : j) {
    if (!e.is_object()) malformed("an entry is not a JSON object");
    KvPair p;
    p.key = text_field(e, "Key", true);
    if (recurse ? !std::string_view(p.key).starts_with(key) : p.key != key)
      malformed(fmt::format("key '{}' was not asked for", printable(p.key)));
    std::string value = text_field(e, "Value", false);
    if (!value.empty()) {
      auto bytes = base64_decode(value);
      if (!bytes) malformed(fmt::format("the value of '{}' is not base64", printable(p.key)));
      p.value = std::move(*bytes);
    }
    p.session = text_field(e, "Session", false);
    p.flags = number(e, "Flags", 0);
    p.lock_index = number(e, "LockIndex", 0);
    p.modify_index = number(e, "ModifyIndex", std::nullopt);
    if (p.modify_index == 0) malformed(fmt::format("ModifyIndex 0 for '{}'", printable(p.key)));
    if (!p.session.empty() && p.lock_index == 0)
      malformed(fmt::format("LockIndex 0 for '{}', which a session holds", printable(p.key)));
    pairs.push_back(std::move(p));
  }
  if (!recurse && pairs.size() > 1) malformed("more than one entry for one key");
  return pairs;
}

bool decode_bool(std::string_view body) {
  std::string_view answer = trimmed(body);
  if (answer == "true") return true;
  if (answer == "false") return false;
  malformed(fmt::format("\"{}\" where true or false was expected", printable(answer, 40)));
}

std::string decode_session_create(std::string_view body) {
  json j = parse(body);
  if (!j.is_object()) malformed("not a JSON object");
  std::string id = text_field(j, "ID", true);
  if (!is_session_id(id))
    malformed(fmt::format("session ID \"{}\" is not a UUID", printable(id, 60)));
  return id;
}

std::optional<SessionInfo> decode_session_info(std::string_view body, std::string_view id) {
  json j = parse(body);
  if (j.is_null()) return std::nullopt;  // Go's client writes an empty list as null
  if (!j.is_array()) malformed("not a JSON array of sessions");
  if (j.empty()) return std::nullopt;
  if (j.size() > 1) malformed("more than one session");
  if (!j[0].is_object()) malformed("the session is not a JSON object");
  SessionInfo s;
  s.id = text_field(j[0], "ID", true);
  if (s.id != id) malformed(fmt::format("session \"{}\" was not asked for", printable(s.id, 60)));
  s.behavior = text_field(j[0], "Behavior", false);
  s.ttl = text_field(j[0], "TTL", false);
  return s;
}

}  // namespace lk
