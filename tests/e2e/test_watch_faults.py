"""-status -watch against a server that goes silent, on every server backend: the server the test
class started is stopped with SIGSTOP (its connections stay open, nothing answers), and continued
once the watch has ended. A healthy server with nothing to say keeps the watch going; a silent one ends it with
1 once it has not been heard for as long as a hold keeps its lease without an answer."""

import contextlib
import os
import re
import signal
import subprocess
import time
import unittest

from etcd_server import EtcdTestCase
from harness import SLOW, Watch, wait_for
from postgres_server import PostgresTestCase, missing as postgres_missing
from test_consul import ConsulTestCase
from test_zookeeper import MISSING, ZooKeeperCase


class SilentServer:
    """The case gives self.prefix and server_pid, the PID of the server it started."""

    # A hold's defaults on etcd and ZooKeeper, and Consul's shortest TTL: a budget of
    # 0.9 × 10 s − 5 s, and a renewal due each half second (LeaseTiming::plan).
    FLAGS = ("-session-ttl", "10s", "-kill-after", "5s")
    BUDGET, RENEW = 4.0, 0.5

    @contextlib.contextmanager
    def server_paused(self):
        """Continued before the case's own clean-up, which may ask the server. Yields when it
        stopped."""
        os.kill(self.server_pid, signal.SIGSTOP)
        try:
            yield time.monotonic()
        finally:
            os.kill(self.server_pid, signal.SIGCONT)

    def test_a_silent_server_ends_the_watch_once_the_budget_passes(self):
        watch = Watch(self, *self.FLAGS, self.prefix)
        self.assertEqual(watch.next(), f"prefix '{self.prefix}': not held\n")
        # A healthy server with nothing to say: the watch goes on past the budget.
        quiet_until = time.monotonic() + 1.5 * self.BUDGET
        wait_for(lambda: watch.proc.poll() is not None or time.monotonic() > quiet_until,
                 2 * self.BUDGET + 10, "the watch to end or the budget to pass")
        if watch.proc.poll() is not None:
            self.fail(f"the watch ended with {watch.proc.returncode}: {watch.ended()}")
        self.assertTrue(watch.quiet(), watch.seen)

        with self.server_paused() as paused:
            try:
                code = watch.proc.wait(timeout=self.BUDGET + 10 * SLOW)
            except subprocess.TimeoutExpired:
                self.fail(f"still watching {time.monotonic() - paused:.1f}s after the server stopped")
            took = time.monotonic() - paused
        err = watch.ended()
        self.assertEqual(code, 1, err)
        said = re.match(rf"lock: stopped watching prefix '{self.prefix}': no answer for (\d+) ms, as long as "
                        r"a hold keeps its lease without one \(-session-ttl, -kill-after\): .+\n\Z", err)
        self.assertTrue(said, err)
        self.assertGreaterEqual(int(said.group(1)), self.BUDGET * 1000)
        # Counted from the last answer, which came at most a renewal period before the stop.
        self.assertGreaterEqual(took, self.BUDGET - self.RENEW - 0.25)
        self.assertLess(took, self.BUDGET + 2.5 * SLOW)
        self.assertEqual(watch.seen, [f"prefix '{self.prefix}': not held\n"])


class EtcdSilentServerTest(SilentServer, EtcdTestCase):
    @property
    def server_pid(self):
        return self.etcd.proc.pid


class ConsulSilentServerTest(SilentServer, ConsulTestCase):
    @property
    def server_pid(self):
        return self.consul.proc.pid


@unittest.skipIf(MISSING, MISSING)
class ZooKeeperSilentServerTest(SilentServer, ZooKeeperCase):
    @property
    def server_pid(self):
        return self.zk.pid


@unittest.skipIf(postgres_missing(), postgres_missing())
class PgSilentServerTest(SilentServer, PostgresTestCase):
    @contextlib.contextmanager
    def server_paused(self):
        """The postmaster and every backend: the watch's own session would answer otherwise."""
        self.pg.pause()
        try:
            yield time.monotonic()
        finally:
            self.pg.resume()


if __name__ == "__main__":
    unittest.main()
