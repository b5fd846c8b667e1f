#include "backend/backends.hpp"
#include "util/error.hpp"

namespace lk {

const BackendInfo kLocalBackend{
    .name = "local",
    .own_flags = {"state-dir"},
    .configure = [](Options& o, const Given& given) {
      // An empty value would otherwise mean the default, silently: a typo'd variable in a script.
      if (given("state-dir") && o.state_dir.empty())
        throw UsageError("-state-dir must not be empty (leave it out for the default)");
    }};

}  // namespace lk
