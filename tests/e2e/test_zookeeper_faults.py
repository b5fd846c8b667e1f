"""The ZooKeeper backend under faults, against a real ZooKeeper: an unreachable ensemble, our node
deleted by hand, the hold's loss (server frozen, a grant smaller than asked, lock killed, a brief
blip), and the leader of an ensemble killed. The rest of the backend is test_zookeeper."""

import os
import re
import signal
import time
import unittest

from fault_proxy import FaultProxy
from harness import SLOW, LockTestCase, pid_alive, read_file, wait_for
from test_zookeeper import MISSING, ZooKeeperCase
from zookeeper_server import ZooKeeperEnsemble


class UnreachableTest(ZooKeeperCase):
    def test_a_closed_port_is_an_error_within_the_session_timeout(self):
        start = time.monotonic()
        r = self.run_lock("-endpoints", "127.0.0.1:1", "-session-ttl", "3s", "-kill-after", "1s",
                          "-timeout", "1m", self.prefix, "touch " + self.path("ran"))
        elapsed = time.monotonic() - start
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "lock: ZooKeeper at 127.0.0.1:1: no server gave us a session "
                         "(is ZooKeeper running there?)\n")
        self.assertLess(elapsed, 3 + 1 * SLOW)
        self.assertFalse(os.path.exists(self.path("ran")))

    def test_a_shorter_timeout_bounds_the_wait(self):
        start = time.monotonic()
        r = self.run_lock("-endpoints", "127.0.0.1:1", "-timeout", "500ms", self.prefix,
                          "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertGreaterEqual(time.monotonic() - start, 0.5)
        self.assertLess(time.monotonic() - start, 0.5 + 1 * SLOW)
        self.assertFalse(os.path.exists(self.path("ran")))

    def test_a_timeout_while_connecting_is_always_said_as_the_timeout(self):
        for _ in range(30):  # ends at the first wrong message
            r = self.run_lock("-endpoints", "127.0.0.1:1", "-timeout", "5ms", self.prefix, "true")
            self.assertEqual((r.returncode, r.stderr),
                             (1, f"lock: timed out waiting for prefix '{self.prefix}'\n"))

    def test_a_dead_endpoint_is_skipped(self):
        r = self.run_lock("-endpoints", "127.0.0.1:1," + self.zk.connect_string, self.prefix, "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_status_of_an_unreachable_ensemble_is_an_error(self):
        start = time.monotonic()
        r = self.run_lock("-endpoints", "127.0.0.1:1", "-session-ttl", "2s", "-kill-after", "1s",
                          "-status", self.prefix)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"^lock: ZooKeeper at 127\.0\.0\.1:1: .+\n$")
        self.assertLess(time.monotonic() - start, 2 + 1 * SLOW)


class DeletionTest(ZooKeeperCase):
    """Our node deleted by an operator (kazoo's delete): the child gets SIGTERM within a second."""

    def child_logging_term(self):
        return (f"trap 'date +%s.%N > {self.path('term')}; exit 0' TERM; "
                f"echo $$ > {self.path('pid')}; while :; do sleep 0.01; done")

    def delete_and_time_the_term(self, holder, node, session=None):
        """Deletes `node` (once `session` watches it, if given); returns the seconds until the
        child's SIGTERM and lock's stderr."""
        if session is not None:
            wait_for(lambda: session in self.watchers(node), 10, "lock to watch its node")
        deleted = time.time()
        self.zk.delete(node)
        self.wait_file("term", "\n")
        latency = float(read_file(self.path("term"))) - deleted
        code, _, err = self.finish(holder)
        self.assertEqual(code, 1)
        return latency, err

    def assert_lost_by_deletion(self, err, node):
        # (The shell may say "Terminated" of its sleep, which got the SIGTERM too.)
        self.assertEqual([line for line in err.splitlines() if line != "Terminated"],
                         [f"lock: lock lost: our node {node} was deleted; the child was stopped"])

    def test_node_deleted_while_watched_stops_the_child_within_a_second(self):
        for n in (1, 2):
            with self.subTest(n=n):
                for name in ("pid", "term"):
                    if os.path.exists(self.path(name)):
                        os.unlink(self.path(name))
                holder = self.start_lock("-n", str(n), "-kill-after", "1s", self.prefix,
                                         self.child_logging_term())
                self.wait_file("pid", "\n")
                (node, (_, stat)), = self.ephemerals_below().items()
                latency, err = self.delete_and_time_the_term(holder, node, stat.ephemeralOwner)
                self.assertLess(latency, 1.0 * SLOW)
                self.assert_lost_by_deletion(err, node)
                self.assert_nothing_left(timeout=0.5)

    def test_node_deleted_right_after_the_child_started_stops_it_within_a_second(self):
        holder = self.start_lock("-session-ttl", "10s", "-kill-after", "1s", self.prefix,
                                 self.child_logging_term())
        self.wait_file("pid", "\n")
        node, = self.ephemerals_below()
        latency, err = self.delete_and_time_the_term(holder, node)
        self.assertLess(latency, 1.0 * SLOW)
        self.assert_lost_by_deletion(err, node)
        self.assert_nothing_left(timeout=0.5)


class LossTest(ZooKeeperCase):
    """Ticks of 200 ms and sessions of at most 4 s: expiry is quick, and a lock asking for its
    default 10 s gets 4 s. Every lock here passes a short -kill-after, which the default 5 s
    would not fit in 4 s (see test_grant_smaller_than_asked...)."""

    SERVER = {"tick_time": 200, "max_session_timeout": 4000}

    def stubborn_child(self):
        """A child that ignores SIGTERM (only SIGKILL ends it) and says its pid."""
        return f"trap '' TERM; echo $$ > {self.path('pid')}; while :; do sleep 0.01; done"

    def test_paused_server_child_dead_before_the_session_could_expire(self):
        timeout, kill_after = 2.0, 0.5
        holder = self.start_lock("-session-ttl", "2s", "-kill-after", "500ms", self.prefix,
                                 self.stubborn_child())
        pid = int(self.wait_file("pid", "\n"))
        (node, (_, stat)), = self.ephemerals_below().items()
        self.assertEqual([c["to"] for c in self.zk.connections() if c["sid"] == stat.ephemeralOwner], [2000])
        paused = time.monotonic()
        self.zk.pause()
        try:
            wait_for(lambda: not pid_alive(pid), timeout + 2, "the child to die")
            dead = time.monotonic()
        finally:
            self.zk.resume()
        # Every request answered was sent before the pause: the server could expire the session
        # `timeout` after the pause at the earliest. The child ignored SIGTERM, so it died of the
        # SIGKILL that comes -kill-after after the stop began, which was after the pause.
        self.assertLess(dead - paused, timeout)
        self.assertGreater(dead - paused, kill_after)
        code, _, err = self.finish(holder)
        self.assertEqual(code, 1)
        self.assertRegex(err, r"lock: lock lost: the lease could not be renewed for .+; "
                         r"the child was stopped\n")
        self.assert_nothing_left(timeout=timeout + 2)
        self.assertIsNone(self.zk.exists(node))

    def test_grant_smaller_than_asked_the_deadline_follows_the_grant(self):
        granted = 4.0
        holder = self.start_lock("-verbose", "-kill-after", "500ms", self.prefix, self.stubborn_child())
        pid = int(self.wait_file("pid", "\n"))
        (node, (_, stat)), = self.ephemerals_below().items()
        self.assertEqual([c["to"] for c in self.zk.connections() if c["sid"] == stat.ephemeralOwner], [4000])
        paused = time.monotonic()
        self.zk.pause()
        try:
            # Asked for 10 s, the stop would begin 8.5 s after the last answer; granted 4 s, 3.1 s.
            wait_for(lambda: not pid_alive(pid), granted + 2, "the child to die")
            dead = time.monotonic()
        finally:
            self.zk.resume()
        self.assertLess(dead - paused, granted)
        code, _, err = self.finish(holder)
        self.assertEqual(code, 1)
        self.assertIn(f"gave us session {stat.ephemeralOwner:x} with a timeout of 4000ms "
                      "(10000ms asked for)", err)
        self.assertIn("lease budget: TTL 4s;", err)
        self.assertIn("lock: lock lost: the lease could not be renewed", err)
        self.assert_nothing_left(timeout=granted + 2)

        # The default -kill-after of 5 s does not fit in what the server grants: refused, naming
        # both the grant and the request, before anything is made.
        r = self.run_lock(self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"^lock: ZooKeeper granted a session timeout of 4000ms "
                         r"\(10000ms asked for\): -kill-after 5s does not fit in -session-ttl 4s.*\n$")
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_nothing_left(timeout=0.5)
        # The retry budget is planned on the grant too.
        r = self.run_lock("-kill-after", "500ms", "-monitor-retry", "40", self.prefix, "true")
        self.assertEqual((r.returncode, r.stderr),
                         (0, "lock: -monitor-retry 40 does not fit in the 3.1s between a renewal and the "
                          "child's stop (-session-ttl 4s less a 10% margin and -kill-after 500ms); "
                          "30 retries, 100ms apart, do\n"))

    def test_server_paused_at_release_exit_within_3s(self):
        holder = self.hold("-kill-after", "500ms", prefix=self.prefix)
        (node, (_, stat)), = self.ephemerals_below().items()
        self.zk.pause()
        try:
            released = self.release()
            code, _, err = self.finish(holder)
            exited = time.monotonic()
        finally:
            self.zk.resume()
        self.assertLess(exited - released, 3 + 0.5 * SLOW)
        self.assertEqual(code, 0)
        self.assertRegex(err, rf"^lock: ZooKeeper at {re.escape(self.zk.connect_string)}: "
                         rf"delete {re.escape(node)}: .+; our node goes when ZooKeeper expires the "
                         r"session, within 4000ms\n$")
        # The delete it sent may yet be carried out; if not, the session expires.
        self.assert_nothing_left(timeout=4 + 2)

    def test_a_server_that_never_answers_is_an_error_within_the_session_timeout(self):
        self.zk.pause()
        try:
            start = time.monotonic()
            r = self.run_lock("-session-ttl", "2s", "-kill-after", "500ms", "-timeout", "1m", self.prefix,
                              "touch " + self.path("ran"))
            elapsed = time.monotonic() - start
        finally:
            self.zk.resume()
        self.assertEqual((r.returncode, r.stderr),
                         (1, f"lock: ZooKeeper at {self.zk.connect_string}: no server gave us a session "
                          "(is ZooKeeper running there?)\n"))
        # The kernel took the connection and the request for a session: its answer is awaited
        # for up to the release budget (2.8 s) past the session timeout.
        self.assertLess(elapsed, 2 + 2.8 + 1 * SLOW)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_nothing_left()

    def test_a_session_granted_after_the_timeout_is_closed_before_exit(self):
        # The server has the request at once and makes the session, but its answer comes 0.8 s
        # later, long after -timeout. Given up meanwhile, the session would stay on the server
        # until its timeout.
        host, port = self.zk.connect_string.rsplit(":", 1)
        with FaultProxy(host, int(port)) as proxy:
            proxy.set_mode("delay", seconds=0.8, replies_only=True)
            start = time.monotonic()
            r = self.run_lock("-endpoints", proxy.address, "-timeout", "100ms", self.prefix,
                              "touch " + self.path("ran"))
            elapsed = time.monotonic() - start
            self.assertEqual((r.returncode, r.stderr), (1, f"lock: timed out waiting for prefix '{self.prefix}'\n"))
            self.assertFalse(os.path.exists(self.path("ran")))
            self.assertLess(elapsed, 0.1 + 2.8 + 1 * SLOW)
            # Closed before lock exited: the server ends it within its pipeline, not its timeout.
            self.assert_nothing_left(timeout=1.0)

    def test_kill_9_of_lock_child_gone_at_once_node_with_the_session(self):
        timeout = 2.0
        holder = self.start_lock("-session-ttl", "2s", "-kill-after", "500ms", self.prefix,
                                 f"sleep 1000 & echo $! > {self.path('grandchild')}; "
                                 f"echo $$ > {self.path('pid')}; wait")
        pids = [int(self.wait_file(name, "\n")) for name in ("pid", "grandchild")]
        (node, (_, stat)), = self.ephemerals_below().items()
        session = stat.ephemeralOwner
        waiter = self.start_lock("-kill-after", "500ms", self.prefix, "touch " + self.path("next"))
        self.wait_children(self.node, 2, "the next contender to queue")
        killed = time.monotonic()
        holder.kill()
        self.assertEqual(self.finish(holder)[0], -signal.SIGKILL)
        wait_for(lambda: not any(map(pid_alive, pids)), 1.0, "the child tree to die with lock")
        # lock could not delete its node: it goes when the server expires the session.
        self.assertFalse(os.path.exists(self.path("next")))
        wait_for(lambda: self.zk.exists(node) is None, timeout + 3, "the session to expire")
        gone = time.monotonic()
        self.assertLess(gone - killed, timeout + 1.0 * SLOW)  # expiry: within a tick or two
        self.assertNotIn(session, self.zk.sessions())
        self.assert_succeeds(waiter)
        self.assertTrue(os.path.exists(self.path("next")))
        self.assert_nothing_left(timeout=0.5)

    def test_a_one_second_pause_of_the_server_the_child_survives(self):
        # Granted 4 s and -kill-after 500ms: the stop would begin 3.1 s after the last answer.
        holder = self.hold("-kill-after", "500ms", prefix=self.prefix)
        for gap in (1.0, 1.25):
            self.zk.pause()
            try:
                time.sleep(1.0)  # the blip itself: its length is what is tested
            finally:
                self.zk.resume()
            resumed = time.monotonic()
            time.sleep(gap)  # healthy time between blips
            self.assertIsNone(holder.poll(), "the hold ended after a blip")
        # Past the instant the stop would have begun, had nothing been answered since the pause.
        wait_for(lambda: holder.poll() is not None or time.monotonic() > resumed + 4.0, 10,
                 "the session's timeout to pass")
        self.assertIsNone(holder.poll(), "the hold ended after a blip")
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()


@unittest.skipIf(MISSING, MISSING)
class EnsembleTest(LockTestCase):
    def test_leader_killed_the_hold_survives(self):
        with ZooKeeperEnsemble(tick_time=500) as ensemble:
            env = dict(self.env, LOCK_BACKEND="zookeeper", ZOOKEEPER_ENDPOINTS=ensemble.connect_string)
            timeout = 4.0
            holder = self.start_lock("-session-ttl", "4s", "-kill-after", "1s", "p",
                                     f"{self.env_to()}while [ ! -e {self.path('release')} ]; "
                                     "do sleep 0.01; done", env=env)
            text = self.wait_file("env", "CONSUL_LOCK_HELD=")
            child_env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
            session, node = int(child_env["LOCK_SESSION"], 16), child_env["LOCK_KEY"]
            self.assertEqual(ensemble.get(node)[1].ephemeralOwner, session)
            leader = ensemble.leader()
            served_by = [i for i, s in enumerate(ensemble.servers)
                         if any(c["sid"] == session for c in ensemble.connections(s.port))]
            killed = time.monotonic()
            ensemble.kill(leader)
            ensemble.wait_leader()
            # The session moves to a server that lives, and the node stays ours.
            survivors = [s for i, s in enumerate(ensemble.servers) if i != leader]
            wait_for(lambda: any(c["sid"] == session for s in survivors for c in ensemble.connections(s.port)),
                     timeout, f"the session (on server {served_by}, leader {leader}) to move")
            # Past the instant by which the child would be dead, had no renewal been answered.
            wait_for(lambda: holder.poll() is not None or time.monotonic() > killed + timeout, 10,
                     "the session's timeout to pass")
            self.assertIsNone(holder.poll(), f"the hold ended: {holder.poll()}")
            self.assertEqual(ensemble.get(node)[1].ephemeralOwner, session)
            self.release()
            code, _, err = self.finish(holder)
            self.assertEqual((code, err), (0, ""))
            self.assertIsNone(ensemble.exists(node))

    def env_to(self, name="env"):
        return f"env > {self.path(name)}.tmp && mv {self.path(name)}.tmp {self.path(name)}; "


if __name__ == "__main__":
    unittest.main()
