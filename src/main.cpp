// argv → options → run (or show the status). Every error ends here, as one line on stderr and exit
// status 1, or -conflict-exit-code when -timeout passed without the lock.
#include <fcntl.h>

#include <cstdio>
#include <exception>

#include "backend/companion.hpp"
#include "backend/errors.hpp"
#include "backend/registry.hpp"
#include "cli/options.hpp"
#include "runner/runner.hpp"
#include "status.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

#ifndef LOCK_VERSION
#define LOCK_VERSION "unknown"
#endif

// A descriptor we open must never land on 0, 1 or 2 and be mistaken for the child's stdio.
static void ensure_stdio_open() {
  for (int fd = 0; fd < 3; ++fd)
    if (fcntl(fd, F_GETFD) < 0) open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
}

// What lock itself printed, all written (see flush_stdout()).
static int written(int status) {
  lk::flush_stdout();
  return status;
}

int main(int argc, char** argv) {
  ensure_stdio_open();
  int conflict_exit_code = 1;
  try {
    lk::Options options = lk::parse_options({argv + 1, argv + argc});
    conflict_exit_code = options.conflict_exit_code;
    if (options.help) {
      std::fputs(lk::usage_text().c_str(), stdout);
      return written(0);
    }
    if (options.version) {
      std::puts("lock " LOCK_VERSION);
      return written(0);
    }
    if (!lk::find_backend(options.backend)->make) lk::exec_companion(argv, options.backend);
    lk::set_verbose(options.verbose);
    return options.status ? written(lk::show_status(options)) : lk::run(options);
  } catch (const lk::AcquireTimeout& e) {
    std::fprintf(stderr, "lock: %s\n", e.what());
    return conflict_exit_code;
  } catch (const lk::UsageError& e) {
    std::fprintf(stderr, "lock: %s (see lock -help)\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lock: %s\n", e.what());
  }
  return 1;
}
