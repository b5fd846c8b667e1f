#pragma once
// Every backend lock knows, and what the command line needs of each before anything runs: its
// name, the executable that carries it (companion.hpp), the flags that are its own, what selects
// it when -backend is not given, and its defaults and limits. Each backend declares all of it in
// its own folder (<p>_options.cpp) and is registered in backends.cpp with one line; which
// executable builds which backend is make_backend.cpp's.
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/options.hpp"

namespace lk {

// Whether a flag was given on the command line (not only through its variable).
using Given = std::function<bool(std::string_view flag)>;

struct BackendInfo {
  std::string_view name;            // as -backend names it
  const char* companion = nullptr;  // the executable that carries it; none: lock itself
  // Flags that apply to this backend and to the others that list them, and to no other.
  std::vector<std::string_view> own_flags = {};
  // In -backend's absence, `consul lock`'s way: any of these flags selects it; failing that, this
  // variable, set and not empty.
  std::vector<std::string_view> selecting_flags = {};
  const char* selecting_env = nullptr;
  // Variables its configure() reads besides its flags' own (option_variables() gathers them).
  std::vector<const char*> variables = {};
  // Once it is chosen: fills its defaults and checks its limits; throws UsageError.
  void (*configure)(Options& o, const Given& given) = nullptr;
};

extern const BackendInfo kLocalBackend, kConsulBackend, kEtcdBackend, kZooKeeperBackend;

// In the order in which they are tried when a flag or a variable would select one; the first is
// the default.
std::span<const BackendInfo* const> backends();
const BackendInfo* find_backend(std::string_view name);
// "local, consul, etcd or zookeeper", for messages.
std::string backend_names();

// The variable's value, or "" when it is not set.
std::string env_or_empty(const char* name);

}  // namespace lk
