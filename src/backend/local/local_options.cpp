#include "backend/local/local_options.hpp"

#include "util/error.hpp"

namespace lk {
namespace {

const FlagInfo kLocalFlags[] = {
    {.name = "state-dir",
     .env = "LOCK_STATE_DIR",
     .value = Value::path,
     .help = "Directory of the local backend's lock files (default /run/lock/lock, "
             "/run/lock/lock-<uid> or /tmp/lock-<uid>)",
     .after = "backend"},
};

std::unique_ptr<BackendConfig> configure(const FlagValues& v, const Given& given) {
  auto o = std::make_unique<LocalOptions>();
  o->state_dir = v.text("state-dir");
  // An empty value would otherwise mean the default, silently: a typo'd variable in a script.
  if (given("state-dir") && o->state_dir.empty())
    throw UsageError("-state-dir must not be empty (leave it out for the default)");
  return o;
}

}  // namespace

const BackendInfo kLocalBackend{
    .name = "local", .flags = rows_of({kLocalFlags}), .configure = configure};

}  // namespace lk
