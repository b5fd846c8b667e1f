#pragma once
// Every backend lock knows, each registered with one line of one list (registry.cpp): what the
// command line needs of it before anything runs (BackendInfo: its name, its flags, what selects
// it, how its configuration is read, the companion that carries it), and, in the executable that
// carries it, its factory and its status reader. Adding a backend is its own folder, that line
// and CMake; nothing outside its folder names its flags or its fields.
#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.hpp"
#include "backend/flag.hpp"

namespace lk {

// A backend's configuration: its own type (<p>_options.hpp), made from the flags by its
// configure() and read only by its own factory and status reader. The fields here are the core
// options every backend is told of.
struct BackendConfig {
  virtual ~BackendConfig() = default;
  bool status_only = false;  // -status: look, never make (no state directory, no lease)
  std::chrono::nanoseconds kill_after{};  // how long stopping the child may take
  int monitor_retry = 3;
};

struct BackendInfo {
  std::string_view name;            // as -backend names it
  const char* companion = nullptr;  // the executable that carries it; none: lock itself
  // Every flag that applies to it: its own rows and those it shares with others. A flag that
  // applies to some backends and not the chosen one is an error, not ignored.
  std::vector<const FlagInfo*> flags = {};
  // In -backend's absence, `consul lock`'s way: any of these flags selects it; failing that, this
  // variable, set and not empty.
  std::vector<std::string_view> selecting_flags = {};
  const char* selecting_env = nullptr;
  // Variables its configure() reads besides its flags' own (option_variables() gathers them).
  std::vector<const char*> variables = {};
  // Once it is chosen: its defaults filled in and its limits checked; throws UsageError.
  std::unique_ptr<BackendConfig> (*configure)(const FlagValues& values,
                                              const Given& given) = nullptr;

  bool applies(std::string_view flag) const;
};

// One line of the registry. `make` and `read_status` are null where the backend runs in its
// companion (companion.hpp).
struct Registered {
  const BackendInfo& info;
  std::unique_ptr<Backend> (*make)(const BackendConfig& config) = nullptr;
  // Who holds `prefix` and who waits, on a connection of its own; `wake` (may be null) cuts a
  // slow answer short with an Error.
  PrefixStatus (*read_status)(const BackendConfig& config, const std::string& prefix,
                              const Wake* wake) = nullptr;
};

// In the order in which they are tried when a flag or a variable would select one; the first is
// the default.
std::span<const Registered> registry();
const Registered* find_backend(std::string_view name);
// "local, consul, etcd or zookeeper", for messages.
std::string backend_names();
// The line of `name`, from an executable that carries it; Error otherwise, which `chosen_by`
// ("-backend etcd") helps explain.
const Registered& carried(std::string_view name, const std::string& chosen_by);

}  // namespace lk
