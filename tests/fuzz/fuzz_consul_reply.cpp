// Consul's replies: consul_reply.hpp's decoders, and WaitIndex's bookkeeping of X-Consul-Index.
// (util/printable, which every message quotes server text with, is fuzzed in fuzz_etcd_reply.)
//
// Input: one byte naming the function (i k b c s w; any other byte picks one by its value),
// a line of tab-separated arguments, then the reply body:
//   i  decode_index(body)                      the X-Consul-Index header
//   k  decode_kv_list(body, key, recurse)      arguments: key, "1" for recurse
//   b  decode_bool(body)
//   c  decode_session_create(body)
//   s  decode_session_info(body, id)           argument: id
//   w  WaitIndex: the body drives a sequence of answered / failed / stalled
// A refusal must be MalformedReply with a message of one printable line, bounded; anything
// accepted must be what the header promises (a session ID is a UUID, keys are the ones asked
// for, indexes above 0...).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "backend/consul/consul_reply.hpp"
#include "backend/consul/wait_index.hpp"
#include "fuzz_check.hpp"

namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr std::size_t kMaxMessage = 512;

void check_refusal(const lk::MalformedReply& e) {
  std::string_view m = e.what();
  FUZZ_CHECK_MSG(!m.empty() && m.size() <= kMaxMessage && fuzz::printable_line(m), fuzz::shown(m));
}

// A UUID, checked character by character: nothing that could be a path ('/', '.', '%'...).
bool uuid(std::string_view id) {
  static const char kShape[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
  if (id.size() != sizeof kShape - 1) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    if (kShape[i] == '-') {
      if (id[i] != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(id[i]))) {
      return false;
    }
  }
  return true;
}

void index_header(std::string_view header) {
  // Reference: decimal digits only, at most 2^64 - 1 (leading zeros allowed, as Go's ParseUint).
  std::optional<std::uint64_t> want = 0;
  if (header.empty()) want.reset();
  for (char c : header) {
    if (!want || c < '0' || c > '9' || *want > (~0ULL - (c - '0')) / 10) {
      want.reset();
      break;
    }
    *want = *want * 10 + static_cast<std::uint64_t>(c - '0');
  }
  std::optional<std::uint64_t> got;
  try {
    got = lk::decode_index(header);
  } catch (const lk::MalformedReply& e) {
    check_refusal(e);
  }
  FUZZ_CHECK_MSG(got == want, fuzz::shown(header));
}

void kv_list(std::string_view body, const std::string& key, bool recurse) {
  std::vector<lk::KvPair> pairs;
  try {
    pairs = lk::decode_kv_list(body, key, recurse);
  } catch (const lk::MalformedReply& e) {
    check_refusal(e);
    return;
  }
  FUZZ_CHECK(recurse || pairs.size() <= 1);
  for (const lk::KvPair& p : pairs) {
    FUZZ_CHECK_MSG(recurse ? p.key.starts_with(key) : p.key == key, fuzz::shown(p.key));
    FUZZ_CHECK(p.modify_index > 0);
    FUZZ_CHECK(p.session.empty() || p.lock_index > 0);
  }
  FUZZ_CHECK(lk::fingerprint(pairs) == lk::fingerprint(std::vector<lk::KvPair>(pairs)));
}

void bool_reply(std::string_view body) {
  std::string_view t = body;
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!t.empty() && space(t.front())) t.remove_prefix(1);
  while (!t.empty() && space(t.back())) t.remove_suffix(1);
  std::optional<bool> want = t == "true" ? std::optional(true) : t == "false" ? std::optional(false) : std::nullopt;
  std::optional<bool> got;
  try {
    got = lk::decode_bool(body);
  } catch (const lk::MalformedReply& e) {
    check_refusal(e);
  }
  FUZZ_CHECK_MSG(got == want, fuzz::shown(body));
}

void session_create(std::string_view body) {
  try {
    std::string id = lk::decode_session_create(body);
    FUZZ_CHECK_MSG(uuid(id), fuzz::shown(id));
  } catch (const lk::MalformedReply& e) {
    check_refusal(e);
  }
}

void session_info(std::string_view body, const std::string& id) {
  FUZZ_CHECK_MSG(lk::is_session_id(id) == uuid(id), fuzz::shown(id));
  std::optional<lk::SessionInfo> info;
  try {
    info = lk::decode_session_info(body, id);
  } catch (const lk::MalformedReply& e) {
    check_refusal(e);
    return;
  }
  if (info) {
    FUZZ_CHECK(info->id == id);
  } else {  // gone: the body said so, as null or as an empty list
    auto j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
    FUZZ_CHECK_MSG(j.is_null() || (j.is_array() && j.empty()), fuzz::shown(body));
  }
}

// wait_index.hpp's contract, restated as a model: where the next query waits, and the range each
// pause must fall in.
void wait_index(std::string_view body) {
  FuzzedDataProvider in(reinterpret_cast<const std::uint8_t*>(body.data()), body.size());
  lk::WaitIndex w(in.ConsumeIntegral<std::uint32_t>());
  std::uint64_t index = 0;
  std::optional<std::uint64_t> entries;
  long bound = lk::WaitIndex::kFirstPause.count();
  long lo = 0, hi = 0;  // the pause expected
  auto no_progress = [&](long took) {
    if (took >= lk::WaitIndex::kMaxPause.count()) {
      bound = lk::WaitIndex::kFirstPause.count();
      lo = hi = 0;
      return;
    }
    lo = std::max(0L, bound / 2 - took);
    hi = std::max(0L, bound - took);
    bound = std::min(bound * 2, static_cast<long>(lk::WaitIndex::kMaxPause.count()));
  };
  for (int step = 0; step < 64 && in.remaining_bytes() > 0; ++step) {
    milliseconds pause;
    switch (in.ConsumeIntegralInRange(0, 2)) {
      case 0: {
        // Small indexes as well as large ones, so that they meet.
        std::uint64_t got = in.ConsumeBool() ? in.ConsumeIntegralInRange<std::uint64_t>(0, 4)
                                             : in.ConsumeIntegral<std::uint64_t>();
        std::uint64_t e = in.ConsumeIntegralInRange<std::uint64_t>(0, 3);
        long took = in.ConsumeIntegralInRange<long>(0, 3000);
        FUZZ_CHECK(w.index() == index);
        pause = w.answered(got, e, milliseconds(took));
        std::uint64_t asked = index;
        bool changed = !entries || *entries != e;
        entries = e;
        if (asked == 0) {
          index = std::max<std::uint64_t>(got, 1);
          lo = hi = 0;
        } else if (got < asked) {
          index = 0;
          no_progress(took);
        } else {
          index = std::max<std::uint64_t>(got, 1);
          if (got > asked && changed) {
            bound = lk::WaitIndex::kFirstPause.count();
            lo = hi = 0;
          } else {
            no_progress(took);
          }
        }
        break;
      }
      case 1: {
        std::optional<std::chrono::seconds> retry_after;
        if (in.ConsumeBool()) retry_after = std::chrono::seconds(in.ConsumeIntegralInRange<long>(0, 999'999'999));
        milliseconds cap(in.ConsumeIntegralInRange<long>(0, 60'000));
        pause = w.failed(retry_after, cap);
        index = 0;
        entries.reset();
        no_progress(0);
        if (retry_after) {
          long honoured = std::min<milliseconds>(*retry_after, cap).count();
          lo = std::max(lo, honoured);
          hi = std::max(hi, honoured);
        }
        break;
      }
      default:
        pause = w.stalled();
        index = 0;
        no_progress(0);
        break;
    }
    FUZZ_CHECK(w.index() == index);
    FUZZ_CHECK_MSG(pause.count() >= lo && pause.count() <= hi,
                   std::to_string(pause.count()) + " ms, expected " + std::to_string(lo) + " to " + std::to_string(hi));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  auto [op, args, body] = fuzz::operation(data, size, "ikbcsw");

  switch (op) {
    case 'i': index_header(body); break;
    case 'k': kv_list(body, args[0], args[1] == "1"); break;
    case 'b': bool_reply(body); break;
    case 'c': session_create(body); break;
    case 's': session_info(body, args[0]); break;
    default: wait_index(body); break;
  }
  return 0;
}
