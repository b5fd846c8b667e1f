#pragma once
// The shipped `lock` is linked statically and carries only the local backend, so that a local
// lock starts without loading any library. Each server backend lives in a companion, the same
// program linked dynamically (host names are resolved through glibc's NSS) with that backend's
// code only: `lock-net` for Consul and etcd (HTTP, with OpenSSL), `lock-zookeeper` for ZooKeeper
// (its C client). `lock` hands over to it by exec,
// keeping its PID, arguments and environment, before it has started anything.
#include <string>

namespace lk {

// Runs the companion that carries `backend`, looked up beside this executable: <dir>/<name> (a
// build tree) and <dir>/../libexec/lock/<name> (an installation). Throws Error naming both when
// neither is there.
[[noreturn]] void exec_companion(char** argv, const std::string& backend);

}  // namespace lk
