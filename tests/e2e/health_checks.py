"""-check on a backend: a command lock runs every -check-interval while the child runs, whose
failures, -check-failures in a row, make lock give the lock up (the child stopped, the lock
released, exit -lost-exit-code), so that a standby takes over from a service that hangs.
test_operators.py runs these on the local backend, each server backend's test file on its own."""

import os
from harness import pid_alive, wait_for
from metrics import outcome, promtool_check, promtool_missing, read_metrics

# The child: says it started, and runs until stopped.
SERVE = "touch {held}; while :; do sleep 0.01; done"


class HealthChecks:
    """The case gives self.prefix, and BACKEND as -metrics-file labels its runs."""

    BACKEND = "local"

    def serve(self, *flags):
        """A holder whose child runs until stopped, with `flags`; returns it once the child runs."""
        holder = self.start_lock("-lost-exit-code", "9", *flags, self.prefix,
                                 SERVE.format(held=self.path("held")))
        wait_for(lambda: os.path.exists(self.path("held")) or holder.poll() is not None,
                 what="the child to start")
        self.assert_running(holder)
        return holder

    def test_failing_checks_give_the_lock_up_to_the_next_in_line(self):
        prom = self.path("job.prom")
        holder = self.serve("-check", f"test -e {self.path('healthy')}", "-check-interval", "200ms",
                            "-check-failures", "2", "-metrics-file", prom)
        waiter = self.start_lock(self.prefix, "touch " + self.path("second"))
        code, _, err = self.finish(holder)
        self.assertEqual(code, 9, err)
        self.assertEqual(err, "lock: gave up the lock: the health check failed 2 times in a row "
                              "(the last exited with status 1); the child was stopped\n")
        self.assert_succeeds(waiter)
        self.assertTrue(os.path.exists(self.path("second")))
        if not promtool_missing():
            self.assertEqual(promtool_check(prom), "")
            m = read_metrics(prom, self.prefix, self.BACKEND)
            self.assertEqual((outcome(m), m["lock_run_child_exit_status"]), ("unhealthy", 128 + 15))

    def test_passing_checks_keep_the_lock_and_see_the_childs_variables(self):
        checks = self.path("checks")
        r = self.run_lock("-check", f'echo "$LOCK_FENCING_TOKEN" >> {checks}', "-check-interval",
                          "100ms", self.prefix,
                          f'until [ "$(cat {checks} 2>/dev/null | wc -l)" -ge 5 ]; do sleep 0.01; done; '
                          'echo "$LOCK_FENCING_TOKEN"')
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        with open(checks) as f:
            tokens = f.read().split()
        self.assertGreaterEqual(len(tokens), 5)
        self.assertEqual(set(tokens), {r.stdout.strip()})

    def test_a_check_that_does_not_end_in_time_fails_and_leaves_nothing_behind(self):
        pids = self.path("pids")
        holder = self.serve("-check", f"echo $$ >> {pids}; sleep 1000 & echo $! >> {pids}; wait",
                            "-check-interval", "300ms", "-check-failures", "2")
        code, _, err = self.finish(holder)
        self.assertEqual(code, 9, err)
        self.assertRegex(err, r"the health check failed 2 times in a row \(the last did not end "
                              r"within 300ms\)")
        with open(pids) as f:
            started = [int(p) for p in f.read().split()]
        self.assertEqual(len(started), 4)  # each check's shell and its background sleep
        wait_for(lambda: not any(pid_alive(p) for p in started), 5, "the checks' processes to go")

    def test_a_check_that_cannot_run_is_a_failure(self):
        holder = self.serve("-check", "/nonexistent/check", "-check-interval", "100ms",
                            "-check-failures", "1")
        code, _, err = self.finish(holder)
        self.assertEqual(code, 9, err)
        self.assertEqual(err, "lock: gave up the lock: the health check exited with status 127; "
                              "the child was stopped\n")

    def test_a_pass_resets_the_count_and_the_output_shows_with_verbose(self):
        # Fails on every second run: never twice in a row.
        count = self.path("count")
        # The count is replaced whole (a rename), so that the child never reads it half-written.
        check = (f'n=$(($(cat {count} 2>/dev/null || echo 0) + 1)); echo $n > {count}.new; '
                 f'mv {count}.new {count}; echo "check $n says"; [ $((n % 2)) -eq 0 ]')
        r = self.run_lock("-verbose", "-check", check, "-check-interval", "100ms", "-check-failures",
                          "2", self.prefix,
                          f'while [ "$(cat {count} 2>/dev/null || echo 0)" -lt 6 ]; do sleep 0.01; done')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("check 1 says\n", r.stderr)
        self.assertRegex(r.stderr, r"the health check exited with status 1 \(1 of 2 failures in a row\)")
        self.assertRegex(r.stderr, r"lock\[\d+\]: the health check passed again\n")
        r = self.run_lock("-check", "echo quiet-check", "-check-interval", "100ms", self.prefix, "sleep 0.5")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))
