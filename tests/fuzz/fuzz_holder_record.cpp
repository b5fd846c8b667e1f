// The holder record: HolderRecord::from_json and to_json.
//
// Input: the text of a record, as found in a lock file or a key's value.
// from_json must return or throw lk::Error ("malformed holder record: ..."); a record it returns
// must come back unchanged from to_json -> from_json, and to_json must write one line of JSON;
// who() must be one printable line.
// Input starting with byte 0x01: a record built from the rest (NUL-separated strings, then pid
// and token), any bytes a user can type; to_json -> from_json must give it back exactly, and
// to_json must add "<field>_base64" for the text fields that are not UTF-8, and only for those.
#include <array>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/holder_record.hpp"
#include "fuzz_check.hpp"
#include "util/error.hpp"

namespace {

using lk::HolderRecord;

bool same(const HolderRecord& a, const HolderRecord& b) {
  return a.prefix == b.prefix && a.name == b.name && a.host == b.host && a.pid == b.pid &&
         a.since == b.since && a.token == b.token && a.until == b.until;
}

std::string describe(const HolderRecord& r) {
  return "prefix " + fuzz::shown(r.prefix) + " name " + fuzz::shown(r.name) + " host " +
         fuzz::shown(r.host) + " pid " + std::to_string(r.pid) + " since " + fuzz::shown(r.since) +
         " token " + std::to_string(r.token) + " until " + fuzz::shown(r.until);
}

// For a message: escaped, so one line whatever the record's writer put in it.
void check_who(const HolderRecord& r) {
  std::string who = r.who();
  // Three texts of at most about 200 bytes each (host, since, until), and the words between.
  FUZZ_CHECK_MSG(fuzz::printable_line(who) && who.size() <= 768, fuzz::shown(who));
}

std::string encode(const HolderRecord& r) {
  std::string json = r.to_json();
  FUZZ_CHECK_MSG(json.ends_with('\n') && json.find('\n') == json.size() - 1, fuzz::shown(json));
  FUZZ_CHECK_MSG(fuzz::utf8(json), fuzz::shown(json));  // JSON is UTF-8
  return json;
}

HolderRecord decode_own(const std::string& json) {
  try {
    return HolderRecord::from_json(json);
  } catch (const lk::Error& e) {
    fuzz::fail("from_json reads what to_json wrote", fuzz::shown(json) + ": " + e.what(), __FILE__, __LINE__);
  }
}

void check_text(const std::string& text) {
  HolderRecord r;
  try {
    r = HolderRecord::from_json(text);
  } catch (const lk::Error& e) {
    FUZZ_CHECK_MSG(std::string_view(e.what()).starts_with("malformed holder record: "), e.what());
    return;
  }
  check_who(r);
  const std::string json = encode(r);
  HolderRecord again = decode_own(json);
  FUZZ_CHECK_MSG(same(again, r), describe(r) + " came back as " + describe(again));
  FUZZ_CHECK(encode(again) == json);
}

void check_record(std::string_view bytes) {
  HolderRecord r;
  auto numbers = fuzz::take_tail<std::array<std::int64_t, 2>>(bytes);
  auto fields = fuzz::split(bytes, '\0');
  fields.resize(6);
  r.prefix = fields[0];
  r.name = fields[1];
  r.host = fields[2];
  r.since = fields[3];
  r.until = fields[4];
  r.pid = static_cast<pid_t>(numbers[0]);
  r.token = static_cast<std::uint64_t>(numbers[1]);

  check_who(r);
  const std::string json = encode(r);
  HolderRecord again = decode_own(json);
  FUZZ_CHECK_MSG(same(again, r), describe(r) + " came back as " + describe(again));
  const auto object = nlohmann::json::parse(json);
  for (auto [key, text] : {std::pair{"prefix", &r.prefix}, {"name", &r.name}, {"host", &r.host},
                           {"since", &r.since}, {"until", &r.until}})
    FUZZ_CHECK_MSG(object.contains(std::string(key) + "_base64") != fuzz::utf8(*text), json);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  if (input.starts_with('\x01'))
    check_record(input.substr(1));
  else
    check_text(std::string(input));
  return 0;
}
