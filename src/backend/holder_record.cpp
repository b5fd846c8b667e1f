#include "backend/holder_record.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>

#include "util/base64.hpp"
#include "util/error.hpp"
#include "util/json_text.hpp"
#include "util/printable.hpp"

namespace lk {

HolderRecord HolderRecord::for_this_process(const std::string& prefix, const std::string& name) {
  HolderRecord r;
  r.prefix = prefix;
  r.name = name;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  r.host = host;
  r.pid = getpid();
  r.since = utc_text(std::chrono::system_clock::now());
  return r;
}

// The calendar by arithmetic: gmtime_r and strftime load the time zone (/etc/localtime) on every
// run, which UTC does not need.
std::string HolderRecord::utc_text(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  auto day = floor<days>(t);
  year_month_day date{day};
  hh_mm_ss time{floor<seconds>(t - day)};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", static_cast<int>(date.year()),
                     static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                     time.hours().count(), time.minutes().count(), time.seconds().count());
}

std::string HolderRecord::to_json() const {
  nlohmann::json j = {{"pid", pid}, {"token", token}};
  // Names and prefixes come from the command line and need not be UTF-8, while JSON must be.
  put_text(j, "prefix", prefix);
  put_text(j, "name", name);
  put_text(j, "host", host);
  put_text(j, "since", since);
  if (!until.empty()) put_text(j, "until", until);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

namespace {

// Another process wrote the record, maybe another program: say what is wrong with it in our
// words, never the JSON library's.
[[noreturn]] void malformed(const std::string& what) {
  throw Error("malformed holder record: " + what);
}

const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) malformed(std::string(name) + " missing");
  return *it;
}

// The exact bytes in "<name>_base64", when the writer had to put them there (see put_text), win
// over the text JSON could hold.
std::string text_field(const nlohmann::json& j, const char* name) {
  const auto& v = field(j, name);
  if (!v.is_string()) malformed(std::string(name) + " is not a string");
  const std::string exact_name = std::string(name) + "_base64";
  auto exact = j.find(exact_name);
  if (exact == j.end()) return v.get<std::string>();
  if (!exact->is_string()) malformed(exact_name + " is not a string");
  auto bytes = base64_decode(exact->get_ref<const std::string&>());
  if (!bytes) malformed(exact_name + " is not base64");
  return *bytes;
}

template <class Int>
Int number_field(const nlohmann::json& j, const char* name) {
  const auto& v = field(j, name);
  if (!v.is_number_integer()) malformed(std::string(name) + " is not a whole number");
  if (v.is_number_unsigned()
          ? v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<Int>::max())
          : v.get<std::int64_t>() < std::int64_t(std::numeric_limits<Int>::min()))
    malformed(std::string(name) + " is out of range");
  return v.get<Int>();
}

}  // namespace

std::string HolderRecord::who() const {
  if (!says_who())
    return value.empty()
               ? "a holder with no record of lock's (not written yet, or another program's)"
               : "a holder known by the value it stored";
  return "pid " + std::to_string(pid) + " on " + printable(host) + " since " + printable(since) +
         (until.empty() ? "" : ", held until " + printable(until) + " (-min-hold)");
}

HolderRecord HolderRecord::from_json(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) malformed("not JSON");
  if (!j.is_object()) malformed("not a JSON object");
  HolderRecord r;
  r.prefix = text_field(j, "prefix");
  r.name = text_field(j, "name");
  r.host = text_field(j, "host");
  r.pid = number_field<pid_t>(j, "pid");
  r.since = text_field(j, "since");
  r.token = number_field<std::uint64_t>(j, "token");
  if (j.contains("until")) r.until = text_field(j, "until");
  return r;
}

std::optional<std::string> HolderRecord::with_until(const std::string& value,
                                                    const std::string& until) {
  try {
    if (from_json(value).pid != getpid()) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(value);
  put_text(j, "until", until);
  bool line = !value.empty() && value.back() == '\n';
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + (line ? "\n" : "");
}

HolderRecord HolderRecord::from_value(const std::string& prefix, const std::string& value,
                                      const std::string& unnamed) {
  try {
    return from_json(value);
  } catch (const Error&) {
    return named(prefix, value, unnamed);
  }
}

HolderRecord HolderRecord::named(const std::string& prefix, const std::string& value,
                                 const std::string& unnamed) {
  HolderRecord r;
  r.prefix = prefix;
  r.name = unnamed;
  r.value = value;
  return r;
}

std::string limited_record_json(const HolderRecord& record, int limit) {
  auto j = nlohmann::json::parse(record.to_json());
  j["limit"] = limit;
  if (!record.value.empty()) put_text(j, "value", record.value);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<LimitedRecord> parse_limited_record(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto limit = j.find("limit");
  if (limit == j.end() || !limit->is_number_integer() || limit->get<long long>() < 1 ||
      limit->get<long long>() > std::numeric_limits<int>::max())
    return std::nullopt;
  try {
    LimitedRecord r{HolderRecord::from_json(std::string(text)),
                    static_cast<int>(limit->get<long long>())};
    if (j.contains("value")) r.record.value = text_field(j, "value");
    return r;
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace lk
