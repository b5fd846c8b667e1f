#pragma once
#include "cli/options.hpp"

namespace lk {

// lock -status: who holds the prefix and who waits, as text or JSON. Returns the exit status:
// 0 when the prefix is held, 3 when it is not (1, for errors, is thrown as usual).
int show_status(const Options& options);

// Flushes standard output. What lock prints is read by scripts: output lost to a full disk or a
// closed pipe is an Error, with its reason (a write that failed as the buffer filled, before the
// flush, left its errno behind), not a success with nothing said.
void flush_stdout();

}  // namespace lk
