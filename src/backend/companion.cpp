#include "backend/companion.hpp"

#include <unistd.h>

#include <filesystem>

#include "backend/registry.hpp"
#include "util/error.hpp"

namespace lk {

void exec_companion(char** argv, const std::string& backend) {
  const Registered* b = find_backend(backend);
  if (!b || !b->info.companion) throw Error("no companion carries the " + backend + " backend");
  // A sanitized build's companions carry its suffix (lock-asan runs lock-net-asan).
  const std::string name = std::string(b->info.companion) + LOCK_COMPANION_SUFFIX;
  std::error_code ec;
  auto dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) throw sys_error("cannot find where lock is installed: /proc/self/exe", ec.value());
  const std::filesystem::path candidates[] = {dir / name, dir / "../libexec/lock" / name};
  for (const auto& path : candidates) {
    execv(path.c_str(), argv);
    if (errno != ENOENT) throw sys_error("cannot run " + path.string());
  }
  throw Error("the " + backend + " backend needs " + name + ", which is neither at " +
              candidates[0].string() + " nor at " + candidates[1].lexically_normal().string());
}

}  // namespace lk
