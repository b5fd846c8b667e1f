#include "backend/companion.hpp"

#include <unistd.h>

#include <filesystem>
#include <string>

#include "util/error.hpp"

namespace lk {

void exec_companion(char** argv, const char* backend) {
  std::error_code ec;
  auto dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) throw sys_error("cannot find where lock is installed: /proc/self/exe", ec.value());
  const std::filesystem::path candidates[] = {dir / "lock-net", dir / "../libexec/lock/lock-net"};
  for (const auto& path : candidates) {
    execv(path.c_str(), argv);
    if (errno != ENOENT) throw sys_error("cannot run " + path.string());
  }
  throw Error(std::string("the ") + backend + " backend needs lock-net, which is neither at " +
              candidates[0].string() + " nor at " + candidates[1].lexically_normal().string());
}

}  // namespace lk
