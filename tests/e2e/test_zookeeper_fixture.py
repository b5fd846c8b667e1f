"""The ZooKeeper fixtures themselves (zookeeper_server.py, curator_peer.py): a real server, Curator's
lock and lease nodes laid out as curator_peer.py's docstring says, and a three-server ensemble
that elects a leader, again after its leader is killed."""

import ipaddress
import os
import re
import shutil
import tempfile
import unittest

from curator_peer import CuratorHolder, missing as curator_missing, start_mutex
from harness import SLOW, max_overlap, read_file, wait_for
from zookeeper_server import ZooKeeperEnsemble, ZooKeeperServer, missing as zookeeper_missing

MISSING = zookeeper_missing() or curator_missing()
UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


@unittest.skipIf(MISSING, MISSING)
class ZooKeeperServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.zk = ZooKeeperServer().__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.zk.__exit__(None, None, None)

    def assert_address(self, data):
        ipaddress.ip_address(data.decode())  # Curator's default node data: the host's address

    def test_curator_mutex_node_and_its_container(self):
        with CuratorHolder(self.zk.connect_string, "/p") as holder:
            holder.wait_acquired()
            self.assertRegex(holder.node, f"^/p/_c_{UUID}-lock-[0-9]{{10}}$")
            self.assertEqual(self.zk.children("/p"), [holder.node.rsplit("/", 1)[1]])
            data, stat = self.zk.get(holder.node)
            self.assert_address(data)
            self.assertEqual(stat.ephemeralOwner, holder.session)
            self.assertEqual(self.zk.get("/p")[1].ephemeralOwner, 0)  # a container shows as 0
            self.assertEqual(holder.session_timeout, 10000)
            self.assertIn(holder.session, self.zk.sessions())
            self.assertEqual(self.zk.ephemerals()[holder.session], [holder.node])
            self.assertEqual(holder.release(), 0)
        self.assertIsNone(self.zk.exists(holder.node))  # deleted before the holder exited
        self.assertNotIn(holder.session, self.zk.sessions())
        # A container: the server deletes it once empty (checkIntervalMs=1000).
        wait_for(lambda: self.zk.exists("/p") is None, 10, "the server to delete the empty /p")

    def test_curator_semaphore_lease(self):
        with CuratorHolder(self.zk.connect_string, "/s", leases=3) as holder:
            holder.wait_acquired()
            self.assertRegex(holder.node, f"^/s/leases/_c_{UUID}-lease-[0-9]{{10}}$")
            self.assertLessEqual(set(self.zk.children("/s")), {"leases", "locks"})
            data, stat = self.zk.get(holder.node)
            self.assert_address(data)
            self.assertEqual(stat.ephemeralOwner, holder.session)
            self.assertEqual(holder.terminate(), 143)  # released in the JVM's SIGTERM hook
        self.assertIsNone(self.zk.exists(holder.node))
        wait_for(lambda: self.zk.exists("/s") is None, 10, "the server to delete the empty /s")

    def test_curator_rounds_log_for_max_overlap(self):
        tmp = tempfile.mkdtemp(prefix="lock-e2e-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        log = os.path.join(tmp, "log")
        peers = [start_mutex(self.zk.connect_string, "/rounds", 5, 5, log) for _ in range(2)]
        for p in peers:
            self.addCleanup(p.kill)
            _, err = p.communicate(timeout=60 * SLOW)
            self.assertEqual((p.returncode, err), (0, ""))
        self.assertEqual(len(read_file(log).splitlines()), 2 * 2 * 5)
        self.assertEqual(max_overlap(log), 1)

    def test_restart_keeps_the_data(self):
        self.zk.create("/kept", b"yes")
        self.zk.kill()
        self.assertFalse(self.zk.alive())
        self.zk.restart()
        self.assertEqual(self.zk.get("/kept")[0], b"yes")
        self.zk.delete("/kept")


@unittest.skipIf(MISSING, MISSING)
class SessionBoundsTest(unittest.TestCase):
    def test_server_grants_less_than_asked(self):
        with ZooKeeperServer(max_session_timeout=5000) as zk:
            with CuratorHolder(zk.connect_string, "/p", session_ms=10000) as holder:
                holder.wait_acquired()
                self.assertEqual(holder.session_timeout, 5000)
                self.assertEqual([c["to"] for c in zk.connections()], [5000])
                self.assertEqual(holder.release(), 0)


@unittest.skipIf(MISSING, MISSING)
class ZooKeeperEnsembleTest(unittest.TestCase):
    def test_a_leader_and_another_after_it_is_killed(self):
        with ZooKeeperEnsemble() as ensemble:
            self.assertEqual(len(ensemble.connect_string.split(",")), 3)
            self.assertTrue(re.fullmatch(r"(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+", ensemble.connect_string))
            leader = ensemble.leader()
            self.assertIsNotNone(leader)
            self.assertEqual(sorted(ensemble.modes()), ["follower", "follower", "leader"])
            ensemble.create("/e", b"1")
            ensemble.kill(leader)
            successor = ensemble.wait_leader()
            self.assertNotEqual(successor, leader)
            self.assertEqual(ensemble.get("/e")[0], b"1")


if __name__ == "__main__":
    unittest.main()
