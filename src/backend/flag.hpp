#pragma once
// A row of lock's one flag table, and what the flags were given. The table is read as one (-help
// lists it, Go's syntax checks it), but its rows come from where each flag is used: the core ones
// from cli/, each backend's from its own folder (<p>_options.cpp), those several backends share
// from the layer they share (lease/, net/). Parsing knows no flag's meaning: the core options
// and each backend's configuration read the values they own from FlagValues.
#include <chrono>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lk {

// What a flag's value is: how Go checks each occurrence of it as it comes (so that an early bad
// value is reported even when a later one would win), and what -help calls it.
enum class Value { boolean, integer, duration, text, when, name, path, api, urls };

struct FlagInfo {
  std::string_view name;
  const char* env = nullptr;  // the variable that stands in for it
  Value value = Value::boolean;
  const char* help = nullptr;   // none: read from the environment only
  const char* group = nullptr;  // its heading in -help; none: the first
  // In -help, right after this flag; a row without one follows the row before it in its list.
  std::string_view after = {};
  // Checks the value that counts (the last one given) as parsing takes it; throws UsageError.
  void (*check)(const std::string& text) = nullptr;
};

// Every row of `lists`, in order: the flags that apply to a backend, its own and those it shares.
std::vector<const FlagInfo*> rows_of(std::initializer_list<std::span<const FlagInfo>> lists);

// Whether a flag was given on the command line (not only through its variable).
using Given = std::function<bool(std::string_view flag)>;

// The value each flag ended with: its last occurrence, else its variable's. Booleans are "true"
// or "false".
class FlagValues {
 public:
  void set(std::string_view flag, std::string text) {
    values_[std::string(flag)] = std::move(text);
  }
  // nullptr when neither the flag nor its variable was given.
  const std::string* find(std::string_view flag) const;
  std::string text(std::string_view flag) const;  // "" when not given
  bool boolean(std::string_view flag, bool otherwise) const;
  std::chrono::nanoseconds duration(std::string_view flag,
                                    std::chrono::nanoseconds otherwise) const;

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

// Go's wording for a value that does not parse: invalid value "x" for flag -f: why.
std::string invalid(std::string_view flag, const std::string& text, const std::string& why);
// A Go duration, or UsageError in those words.
std::chrono::nanoseconds duration_value(std::string_view flag, const std::string& text);
// A variable read as a boolean (CONSUL_HTTP_SSL): `otherwise` when empty, UsageError when not one.
bool env_bool(const char* env, const std::string& text, bool otherwise);
// The variable's value, or "" when it is not set.
std::string env_or_empty(const char* name);

}  // namespace lk
