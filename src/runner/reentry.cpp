#include "runner/reentry.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "backend/registry.hpp"
#include "runner/child.hpp"
#include "runner/exit_status.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace lk {
namespace {

std::optional<std::uint64_t> token_given() {
  const char* text = std::getenv("LOCK_FENCING_TOKEN");
  std::uint64_t token = 0;
  if (!text || std::from_chars(text, text + std::strlen(text), token).ec != std::errc())
    return std::nullopt;
  return token;
}

// Our parent, its parent, ... up to init, as /proc tells them.
std::set<pid_t> ancestors() {
  std::set<pid_t> out;
  for (pid_t pid = getppid(); pid > 1 && out.insert(pid).second;) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) break;
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, the last ')' ends it.
    auto close = line.rfind(')');
    if (close == std::string::npos) break;
    char state;
    int parent = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &parent) != 2) break;
    pid = parent;
  }
  return out;
}

}  // namespace

std::optional<std::string> enclosing_hold(const Options& o) {
  const char* prefix = std::getenv("LOCK_PREFIX");
  auto token = token_given();
  if (!prefix || prefix != o.prefix || !token) return std::nullopt;
  PrefixStatus status;
  try {
    status =
        carried(o.backend, o.backend_chosen_by).read_status(*o.backend_config, o.prefix, nullptr);
  } catch (const Error& e) {
    verbose("cannot tell whether an enclosing lock holds prefix '{}': {}", o.prefix, e.what());
    return std::nullopt;
  }
  if (status.limit != o.limit) return std::nullopt;
  std::string host = HolderRecord::for_this_process("", "").host;
  std::set<pid_t> above = ancestors();
  for (const HolderRecord& h : status.holders)
    if (h.token == *token && h.host == host && above.contains(h.pid))
      return h.who() + ", fencing token " + std::to_string(h.token);
  return std::nullopt;
}

void run_reentrant(const Options& o) {
  if (!o.pass_stdin) {
    int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, STDIN_FILENO) < 0) throw sys_error("cannot open /dev/null");
    if (null != STDIN_FILENO) close(null);
  }
  std::vector<std::string> argv = child_argv(o.child, o.shell);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  execvp(args[0], args.data());
  // As a run whose child could not be started exits (exit_status.hpp).
  RunResult result;
  result.exec_error = errno;
  result.child = {false, errno == ENOENT ? 127 : 126};
  std::fprintf(stderr, "lock: cannot run %s: %s\n", argv[0].c_str(), std::strerror(errno));
  std::exit(exit_code(result, o));
}

}  // namespace lk
