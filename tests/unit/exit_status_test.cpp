// exit_code: what lock exits with once the child ran and the lock was released.
#include <doctest/doctest.h>

#include <cerrno>
#include <csignal>
#include <string>

#include "cli/options.hpp"
#include "runner/exit_status.hpp"

using lk::ChildEnd;
using lk::exit_code;
using lk::Options;
using lk::RunResult;

namespace {

enum class Mode { plain, child_exit_code, preserve_status, both };

Options options(Mode mode) {
  Options o;
  o.child_exit_code = mode == Mode::child_exit_code || mode == Mode::both;
  o.preserve_status = mode == Mode::preserve_status || mode == Mode::both;
  return o;
}

RunResult exited(int code) {
  RunResult r;
  r.child = {false, code};
  return r;
}

RunResult killed(int signal) {
  RunResult r;
  r.child = {true, signal};
  return r;
}

// The child could not be started: it has exited with 127 (not found) or 126 (other errors).
RunResult exec_failed(int err) {
  RunResult r = exited(err == ENOENT ? 127 : 126);
  r.exec_error = err;
  return r;
}

RunResult lost(RunResult r) {
  r.lost = "the lock file /s/p/slot.0 was removed or replaced";
  return r;
}

}  // namespace

TEST_CASE("ChildEnd::failed: a non-zero status or any signal") {
  CHECK_FALSE((ChildEnd{false, 0}).failed());
  CHECK((ChildEnd{false, 1}).failed());
  CHECK((ChildEnd{false, 255}).failed());
  CHECK((ChildEnd{true, SIGTERM}).failed());
  CHECK((ChildEnd{true, SIGKILL}).failed());
}

TEST_CASE("without options: 0 whatever the child did, as consul lock") {
  const Options o = options(Mode::plain);
  CHECK(exit_code(exited(0), o) == 0);
  CHECK(exit_code(exited(1), o) == 0);
  CHECK(exit_code(exited(42), o) == 0);
  CHECK(exit_code(killed(SIGTERM), o) == 0);
  CHECK(exit_code(killed(SIGKILL), o) == 0);
}

TEST_CASE("-child-exit-code: 2 when the child failed, else 0") {
  const Options o = options(Mode::child_exit_code);
  CHECK(exit_code(exited(0), o) == 0);
  CHECK(exit_code(exited(1), o) == 2);
  CHECK(exit_code(exited(42), o) == 2);
  CHECK(exit_code(killed(SIGTERM), o) == 2);
  CHECK(exit_code(killed(SIGKILL), o) == 2);
}

TEST_CASE("-preserve-status: the child's own status, 128+N for signal N") {
  const Options o = options(Mode::preserve_status);
  CHECK(exit_code(exited(0), o) == 0);
  CHECK(exit_code(exited(1), o) == 1);
  CHECK(exit_code(exited(42), o) == 42);
  CHECK(exit_code(exited(255), o) == 255);
  CHECK(exit_code(killed(SIGTERM), o) == 128 + SIGTERM);
  CHECK(exit_code(killed(SIGKILL), o) == 128 + SIGKILL);
  CHECK(exit_code(killed(SIGINT), o) == 128 + SIGINT);
}

TEST_CASE("-preserve-status wins over -child-exit-code") {
  const Options o = options(Mode::both);
  CHECK(exit_code(exited(0), o) == 0);
  CHECK(exit_code(exited(3), o) == 3);
  CHECK(exit_code(killed(SIGTERM), o) == 128 + SIGTERM);
}

TEST_CASE("a child that could not be started: 1, or 2 with -child-exit-code") {
  CHECK(exit_code(exec_failed(ENOENT), options(Mode::plain)) == 1);
  CHECK(exit_code(exec_failed(EACCES), options(Mode::plain)) == 1);
  CHECK(exit_code(exec_failed(ENOENT), options(Mode::child_exit_code)) == 2);
  CHECK(exit_code(exec_failed(EACCES), options(Mode::child_exit_code)) == 2);
}

TEST_CASE("a child that could not be started, -preserve-status: 127 not found, 126 otherwise") {
  CHECK(exit_code(exec_failed(ENOENT), options(Mode::preserve_status)) == 127);
  CHECK(exit_code(exec_failed(EACCES), options(Mode::preserve_status)) == 126);
  CHECK(exit_code(exec_failed(ENOENT), options(Mode::both)) == 127);
  CHECK(exit_code(exec_failed(ENOEXEC), options(Mode::both)) == 126);
}

TEST_CASE("a lost hold is an error: 1 whatever the options and the child") {
  for (Mode mode : {Mode::plain, Mode::child_exit_code, Mode::preserve_status, Mode::both}) {
    CAPTURE(static_cast<int>(mode));
    const Options o = options(mode);
    CHECK(exit_code(lost(exited(0)), o) == 1);
    CHECK(exit_code(lost(exited(42)), o) == 1);
    CHECK(exit_code(lost(killed(SIGTERM)), o) == 1);
    CHECK(exit_code(lost(killed(SIGKILL)), o) == 1);
    CHECK(exit_code(lost(exec_failed(ENOENT)), o) == 1);
  }
}

TEST_CASE("an empty loss reason still counts as a loss") {
  RunResult r = exited(0);
  r.lost = "";
  CHECK(exit_code(r, options(Mode::plain)) == 1);
}

TEST_CASE("a child never started is told as one that could not be run; a lost lock is still 1") {
  RunResult gone;
  gone.not_run = "lock's watchdog (pid 7) is gone";
  CHECK(exit_code(gone, options(Mode::plain)) == 1);
  CHECK(exit_code(gone, options(Mode::child_exit_code)) == 2);
  CHECK(exit_code(gone, options(Mode::preserve_status)) == 126);
  RunResult refused = lost(gone);
  for (Mode m : {Mode::plain, Mode::child_exit_code, Mode::preserve_status, Mode::both})
    CHECK(exit_code(refused, options(m)) == 1);
}

TEST_CASE("a watchdog that died while the tree ran is 1, whatever the child did") {
  RunResult r = exited(0);
  r.unguarded = "lock's watchdog (pid 7) was killed by SIGKILL";
  for (Mode m : {Mode::plain, Mode::child_exit_code, Mode::preserve_status, Mode::both})
    CHECK(exit_code(r, options(m)) == 1);
}

TEST_CASE("-lost-exit-code: the status of a lost hold, whatever the options and the child") {
  for (Mode m : {Mode::plain, Mode::child_exit_code, Mode::preserve_status, Mode::both}) {
    Options o = options(m);
    o.lost_exit_code = 9;
    CHECK(exit_code(lost(exited(0)), o) == 9);
    CHECK(exit_code(lost(killed(SIGTERM)), o) == 9);
    RunResult never_ran = lost(RunResult());
    never_ran.not_run = "the lock was lost first";
    CHECK(exit_code(never_ran, o) == 9);
    CHECK(exit_code(exited(0), o) == 0);
  }
}
