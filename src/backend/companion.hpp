#pragma once
// The shipped `lock` is linked statically and carries only the local backend, so that a local
// lock starts without loading any library. The network backends live in `lock-net`, the same
// program linked dynamically with libcurl; `lock` hands over to it by exec, keeping its PID,
// arguments and environment, before it has started anything.

namespace lk {

// Where lock-net is, looked up beside this executable: <dir>/lock-net (a build tree) and
// <dir>/../libexec/lock/lock-net (an installation). Throws Error naming both when neither is.
[[noreturn]] void exec_companion(char** argv, const char* backend);

}  // namespace lk
