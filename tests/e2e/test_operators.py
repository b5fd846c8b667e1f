"""The flags operators of cron jobs and systemd units use, on the local backend (each server
backend's own test file runs the same tests on it), and -metrics-file as node_exporter serves it."""

import os
import shutil
import signal
import subprocess
import unittest
import urllib.request

from harness import PATH_CHECK_PERIOD, LockTestCase, OperatorFlags, free_port, wait_for
from health_checks import HealthChecks
from nested_runs import NestedRuns
from metrics import outcome


class LocalOperatorsTest(OperatorFlags, LockTestCase):
    LOSS_BOUND = PATH_CHECK_PERIOD + 1

    def setUp(self):
        super().setUp()
        self.prefix = "p"

    def lose(self):
        # The holder's lock file goes with its directory: a newcomer would make a fresh one.
        shutil.rmtree(os.path.join(self.state, self.prefix))

    def test_the_metrics_file_tells_an_interrupted_wait_and_an_error(self):
        prom = self.path("job.prom")
        holder = self.hold(prefix=self.prefix)
        waiter = self.start_lock("-metrics-file", prom, self.prefix, "true")
        wait_for(lambda: self.tickets() or waiter.poll() is not None, what="the waiter to queue")
        waiter.send_signal(signal.SIGTERM)
        self.finish(waiter)
        self.assertEqual(outcome(self.metrics()), "interrupted")
        self.release()
        self.assert_succeeds(holder)
        with open(self.path("not-a-directory"), "w"):
            pass
        r = self.run_lock("-state-dir", self.path("not-a-directory"), "-metrics-file", prom, self.prefix, "true")
        self.assertEqual(r.returncode, 1)
        m = self.metrics()
        self.assertEqual((outcome(m), m["lock_run_held_seconds"]), ("error", 0))

    def test_a_metrics_file_that_cannot_be_written_is_a_warning_and_the_job_runs(self):
        r = self.run_lock("-metrics-file", self.path("missing/job.prom"), self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 0)
        self.assertTrue(os.path.exists(self.path("ran")))
        # Once at acquisition, once at the end.
        self.assertEqual(r.stderr, 2 * f"lock: warning: -metrics-file: cannot write {self.path('missing/job.prom')}: "
                                       "No such file or directory\n")

    def test_node_exporter_serves_the_file_as_it_is_written(self):
        exporter_path = shutil.which("prometheus-node-exporter")
        if not exporter_path:
            self.skipTest("prometheus-node-exporter is missing")
        textfiles = self.path("textfiles")
        os.mkdir(textfiles)
        self.prefix = 'cron/"backup"'
        r = self.run_lock("-metrics-file", os.path.join(textfiles, "backup.prom"), self.prefix, "exit 4")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        port = free_port()
        exporter = subprocess.Popen(
            [exporter_path, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
             "--collector.textfile", f"--collector.textfile.directory={textfiles}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.procs.append(exporter)

        def scrape():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
                    return reply.read().decode()
            except OSError:
                self.assertIsNone(exporter.poll(), "node_exporter ended")
                return None
        body = wait_for(scrape, what="node_exporter to serve")
        self.assertIn("node_textfile_scrape_error 0\n", body)
        self.assertIn('lock_run_outcome{backend="local",outcome="ran",prefix="cron/\\"backup\\""} 1\n', body)
        self.assertIn('lock_run_child_exit_status{backend="local",prefix="cron/\\"backup\\""} 4\n', body)



class LocalHealthChecksTest(HealthChecks, LockTestCase):
    def setUp(self):
        super().setUp()
        self.prefix = "p"


class LocalNestedRunsTest(NestedRuns, LockTestCase):
    def setUp(self):
        super().setUp()
        self.prefix = "p"


if __name__ == "__main__":
    unittest.main()
