#include "runner/exit_status.hpp"

namespace lk {

int exit_code(const RunResult& r, const Options& o) {
  if (r.lost) return o.lost_exit_code;
  if (r.unguarded) return 1;
  if (r.not_run)
    return o.preserve_status ? 126 : o.child_exit_code ? 2 : 1;  // as if it could not run
  if (o.preserve_status) return r.child.shell_status();
  if (r.exec_error) return o.child_exit_code ? 2 : 1;
  if (o.child_exit_code && r.child.failed()) return 2;
  return 0;
}

}  // namespace lk
