// etcd's JSON gateway replies: every decoder of etcd_reply.hpp, parse_int64, etcd_int and
// etcd_positive, the base64 the gateway writes keys and values in, and util/printable, which
// every message of both server backends quotes server text with.
//
// Input: one byte naming the function (any other byte picks one by its value), a line of
// tab-separated arguments, then the body:
//   T printable(body, max)          max: decimal, default 200
//   n parse_int64(body)
//   e etcd_int and etcd_positive    body: a JSON object; argument: the field
//   S decode_status(body)
//   h decode_header(body)
//   g decode_lease_grant(body)
//   a decode_keepalive(body, lease) lease: decimal above 0
//   q decode_queue_txn(body, key, lease, queue_from, queue_end)
//   r decode_range(body, key, range_end)
//   w decode_watch_message(body)
//   A decode_auth_token(body)
//   b base64_decode(body), base64_encode(body)
// A refusal must be MalformedReply with a message of one printable line, bounded (decode_status
// never throws); what is accepted must be what the header promises.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <optional>
#include <string>

#include "backend/etcd/etcd_reply.hpp"
#include "fuzz_check.hpp"
#include "util/base64.hpp"
#include "util/printable.hpp"

namespace {

using nlohmann::json;

constexpr std::size_t kMaxMessage = 512;
constexpr std::int64_t kLease = 0x694d7c3e5a1b2c0d;

void check_refusal(const lk::MalformedReply& e) {
  std::string_view m = e.what();
  FUZZ_CHECK_MSG(!m.empty() && m.size() <= kMaxMessage && fuzz::printable_line(m), fuzz::shown(m));
}

// Server text in a message: one printable line of about max bytes (an escape, then "...").
void check_printable(std::string_view out, std::size_t max = 200) {
  FUZZ_CHECK_MSG(fuzz::printable_line(out) && out.size() <= max + 6, fuzz::shown(out));
}

// Runs `decode`; a refusal is checked and gives false.
template <class F>
bool accepted(F&& decode) {
  try {
    decode();
    return true;
  } catch (const lk::MalformedReply& e) {
    check_refusal(e);
    return false;
  }
}

std::optional<std::int64_t> reference_int64(std::string_view s) {
  bool neg = s.starts_with('-');
  if (neg) s.remove_prefix(1);
  if (s.empty()) return std::nullopt;
  __int128 v = 0;  // leading zeros are fine, however many
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
    if (v > INT64_MAX + __int128{1}) return std::nullopt;  // too big, whatever follows
  }
  if (neg) v = -v;
  if (v > INT64_MAX || v < INT64_MIN) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

std::int64_t lease_arg(const std::string& text) {
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  return ec == std::errc() && end == text.data() + text.size() && n > 0 ? n : kLease;
}

// printable()'s escape for the character `s` starts with, as util/printable.hpp words it, and
// how many bytes of `s` it stands for.
std::pair<std::string, std::size_t> escaped(std::string_view s) {
  char32_t code = 0;
  std::size_t n = fuzz::utf8_char(s, &code);
  if (s[0] == '\n') return {"\\n", 1};
  if (s[0] == '\r') return {"\\r", 1};
  if (s[0] == '\t') return {"\\t", 1};
  if (s[0] == '\\') return {"\\\\", 1};
  if (n > 0 && code >= 0x20 && !(code >= 0x7f && code < 0xa0)) return {std::string(s.substr(0, n)), n};
  char hex[5];
  std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(s[0]));
  return {hex, 1};
}

// printable()'s output read back: every escape well formed.
std::string unescape(std::string_view out) {
  std::string back;
  for (std::size_t i = 0; i < out.size();) {
    if (out[i] != '\\') {
      back += out[i++];
      continue;
    }
    FUZZ_CHECK_MSG(i + 1 < out.size(), fuzz::shown(out));
    char e = out[i + 1];
    i += 2;
    if (e == 'n') back += '\n';
    else if (e == 'r') back += '\r';
    else if (e == 't') back += '\t';
    else if (e == '\\') back += '\\';
    else {
      FUZZ_CHECK_MSG(e == 'x' && i + 1 < out.size() && std::isxdigit(static_cast<unsigned char>(out[i])) &&
                         std::isxdigit(static_cast<unsigned char>(out[i + 1])),
                     fuzz::shown(out));
      back += static_cast<char>(std::stoi(std::string(out.substr(i, 2)), nullptr, 16));
      i += 2;
    }
  }
  return back;
}

// The escapes of `text`, one character after the other.
std::string escape_all(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    auto [piece, used] = escaped(text);
    out += piece;
    text.remove_prefix(used);
  }
  return out;
}

void printable(std::string_view body, std::size_t max) {
  const std::string out = lk::printable(body, max);
  check_printable(out, max);
  const std::string shown = fuzz::shown(out) + " for " + fuzz::shown(body);
  // The whole text escaped, or a prefix of it and "..." where the next character would pass max.
  std::string_view head = out;
  const bool dots = out.ends_with("...");
  if (dots) head.remove_suffix(3);
  const std::string back = unescape(head);
  if (!dots || back + "..." == body) {
    FUZZ_CHECK_MSG(unescape(out) == body && escape_all(body) == out, shown);
    return;
  }
  FUZZ_CHECK_MSG(body.starts_with(back) && back.size() < body.size(), shown);
  FUZZ_CHECK_MSG(escape_all(back) == head, shown);  // never cut inside a character
  FUZZ_CHECK_MSG(head.size() <= max && head.size() + escaped(body.substr(back.size())).first.size() > max, shown);
}

void int64_text(std::string_view body) {
  FUZZ_CHECK_MSG(lk::parse_int64(body) == reference_int64(body), fuzz::shown(body));
}

void number_field(std::string_view body, const std::string& field) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return;
  // etcd_int's reference: left out or null is 0, a decimal string or an integer in int64's range.
  std::optional<std::int64_t> want;
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) want = 0;
  else if (it->is_string()) want = reference_int64(it->get<std::string>());
  else if (it->is_number_unsigned()) {
    if (it->get<std::uint64_t>() <= INT64_MAX) want = static_cast<std::int64_t>(it->get<std::uint64_t>());
  } else if (it->is_number_integer()) want = it->get<std::int64_t>();
  std::optional<std::int64_t> got, positive;
  accepted([&] { got = lk::etcd_int(j, field.c_str()); });
  accepted([&] { positive = lk::etcd_positive(j, field.c_str()); });
  FUZZ_CHECK(got == want);
  FUZZ_CHECK(positive == (want && *want > 0 ? want : std::nullopt));
}

void status(std::string_view body) {
  lk::EtcdStatus s = lk::decode_status(body);  // never throws: anything escapes to the fuzzer
  check_printable(s.message);
}

void header(std::string_view body) {
  std::int64_t revision = 0;
  if (accepted([&] { revision = lk::decode_header(body); })) FUZZ_CHECK(revision > 0);
}

void lease_grant(std::string_view body) {
  lk::LeaseGrant g;
  if (accepted([&] { g = lk::decode_lease_grant(body); })) FUZZ_CHECK(g.id > 0 && g.ttl > 0);
}

void keepalive(std::string_view body, std::int64_t lease) {
  lk::KeepAlive k;
  if (!accepted([&] { k = lk::decode_keepalive(body, lease); })) return;
  if (k.error) {
    FUZZ_CHECK(!k.error->message.empty());
    check_printable(k.error->message);
  } else {
    FUZZ_CHECK(k.ttl >= 0);
  }
}

// etcd orders keys as unsigned bytes.
bool bytes_less(std::string_view a, std::string_view b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return static_cast<unsigned char>(x) < static_cast<unsigned char>(y);
  });
}

// etcd's range: [key, range_end); "\0" as range_end means every key from key on, and none
// means `key` alone.
bool asked(std::string_view got, const std::string& key, const std::string& range_end) {
  if (range_end.empty()) return got == key;
  return !bytes_less(got, key) && (range_end == std::string(1, '\0') || bytes_less(got, range_end));
}

void queue_txn(std::string_view body, const std::string& key, std::int64_t lease, const std::string& from,
               const std::string& end) {
  lk::QueuedKey q;
  if (!accepted([&] { q = lk::decode_queue_txn(body, key, lease, from, end); })) return;
  FUZZ_CHECK(q.queue.revision > 0);
  FUZZ_CHECK(q.create_revision > 0 && q.create_revision <= q.queue.revision);
  FUZZ_CHECK(!q.created || q.create_revision == q.queue.revision);
  int ours = 0;
  for (std::size_t i = 0; i < q.queue.kvs.size(); ++i) {
    const lk::KeyValue& kv = q.queue.kvs[i];
    FUZZ_CHECK(i == 0 || kv.create_revision > q.queue.kvs[i - 1].create_revision);
    FUZZ_CHECK_MSG(asked(kv.key, from, end), fuzz::shown(kv.key));
    if (kv.key == key) {
      ++ours;
      FUZZ_CHECK(kv.lease == lease && kv.create_revision == q.create_revision);
    }
  }
  FUZZ_CHECK(ours == 1);
}

void range(std::string_view body, const std::string& key, const std::string& range_end) {
  lk::RangeReply r;
  if (!accepted([&] { r = lk::decode_range(body, key, range_end); })) return;
  FUZZ_CHECK(r.revision > 0);
  for (const lk::KeyValue& kv : r.kvs) {
    FUZZ_CHECK(kv.create_revision > 0 && kv.create_revision <= r.revision);
    FUZZ_CHECK_MSG(asked(kv.key, key, range_end), fuzz::shown(kv.key));
  }
}

void watch(std::string_view body) {
  lk::WatchMessage m;
  if (!accepted([&] { m = lk::decode_watch_message(body); })) return;
  if (m.error) {
    FUZZ_CHECK(!m.error->message.empty());
    check_printable(m.error->message);
    return;
  }
  FUZZ_CHECK(m.revision > 0);
  FUZZ_CHECK(m.compact_revision >= 0);
  check_printable(m.cancel_reason);
  for (const lk::WatchEvent& e : m.events) {
    FUZZ_CHECK(e.kv.create_revision >= 0);
    FUZZ_CHECK(!e.prev_kv || e.prev_kv->create_revision >= 0);
  }
}

void auth_token(std::string_view body) {
  std::string token;
  if (!accepted([&] { token = lk::decode_auth_token(body); })) return;
  FUZZ_CHECK(!token.empty());
  for (unsigned char c : token) FUZZ_CHECK_MSG(c >= 0x20 && c != 0x7f, fuzz::shown(token));  // fit for a header line
}

void base64(std::string_view body) {
  std::string text = lk::base64_encode(body);
  FUZZ_CHECK(text.size() == (body.size() + 2) / 3 * 4);
  FUZZ_CHECK(lk::base64_decode(text) == std::string(body));
  if (auto bytes = lk::base64_decode(body)) {
    std::size_t pad = body.ends_with("==") ? 2 : body.ends_with('=') ? 1 : 0;
    FUZZ_CHECK(body.size() % 4 == 0 && bytes->size() == body.size() / 4 * 3 - pad);
    FUZZ_CHECK(body.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") ==
               std::string_view::npos);
    FUZZ_CHECK(body.find('=') == std::string_view::npos || body.find('=') >= body.size() - pad);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  auto [op, args, body] = fuzz::operation(data, size, "TneShgaqrwAb");

  switch (op) {
    case 'T': {
      std::size_t max = 200;
      if (!args[0].empty() && args[0].size() <= 4 && args[0].find_first_not_of("0123456789") == std::string::npos)
        max = std::stoul(args[0]);
      printable(body, max);
      break;
    }
    case 'n': int64_text(body); break;
    case 'e':  // the field is one of ours in real use: a short printable name
      number_field(body, fuzz::printable_line(args[0]) && args[0].size() <= 40 ? args[0] : "revision");
      break;
    case 'S': status(body); break;
    case 'h': header(body); break;
    case 'g': lease_grant(body); break;
    case 'a': keepalive(body, lease_arg(args[0])); break;
    case 'q':
      args.resize(4);
      queue_txn(body, args[0], lease_arg(args[1]), args[2], args[3]);
      break;
    case 'r': range(body, args[0], args[1]); break;
    case 'w': watch(body); break;
    case 'A': auth_token(body); break;
    default: base64(body); break;
  }
  return 0;
}
