#include "cli/go_flags.hpp"

#include "util/error.hpp"

namespace lk {

GoArgs split_go_flags(const std::vector<std::string>& args,
                      const std::function<std::optional<FlagKind>(std::string_view)>& kind_of) {
  GoArgs out;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') break;  // the prefix (or a lone "-")
    if (arg == "--") {
      ++i;
      break;
    }
    std::string_view body = arg.substr(arg[1] == '-' ? 2 : 1);
    if (body.empty() || body[0] == '-' || body[0] == '=')
      throw UsageError("bad flag syntax: " + std::string(arg));
    auto eq = body.find('=');
    std::string name(body.substr(0, eq));
    auto kind = kind_of(name);
    if (!kind) throw UsageError("flag provided but not defined: -" + name);
    std::optional<std::string> value;
    if (eq != std::string_view::npos) value = std::string(body.substr(eq + 1));
    if (*kind == FlagKind::boolean) {
      auto b = parse_go_bool(value.value_or("true"));
      if (!b)
        throw UsageError("invalid boolean value \"" + *value + "\" for -" + name + ": parse error");
      value = *b ? "true" : "false";
    } else if (!value) {
      if (i + 1 == args.size()) throw UsageError("flag needs an argument: -" + name);
      value = args[++i];
    }
    out.flags.emplace_back(std::move(name), std::move(*value));
    if (out.flags.back().first == "h" || out.flags.back().first == "help") return out;
  }
  out.rest.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return out;
}

}  // namespace lk
