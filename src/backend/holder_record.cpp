#include "backend/holder_record.hpp"

#include <unistd.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace lk {

HolderRecord HolderRecord::for_this_process(const std::string& prefix, const std::string& name) {
  HolderRecord r;
  r.prefix = prefix;
  r.name = name;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  r.host = host;
  r.pid = getpid();
  std::time_t now = std::time(nullptr);
  std::tm utc;
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  r.since = buf;
  return r;
}

std::string HolderRecord::to_json() const {
  nlohmann::json j = {{"prefix", prefix}, {"name", name},   {"host", host},
                      {"pid", pid},       {"since", since}, {"token", token}};
  // Names and prefixes come from the command line and need not be UTF-8; JSON must be.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

HolderRecord HolderRecord::from_json(const std::string& text) {
  try {
    auto j = nlohmann::json::parse(text);
    HolderRecord r;
    r.prefix = j.at("prefix").get<std::string>();
    r.name = j.at("name").get<std::string>();
    r.host = j.at("host").get<std::string>();
    r.pid = j.at("pid").get<pid_t>();
    r.since = j.at("since").get<std::string>();
    r.token = j.at("token").get<std::uint64_t>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed holder record: ") + e.what());
  }
}

}  // namespace lk
