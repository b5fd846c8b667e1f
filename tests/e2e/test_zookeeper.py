"""The ZooKeeper backend against a real ZooKeeper: Curator's layout, interop with the real Curator
both ways, -status, FIFO, -timeout and conflicting limits, and nothing left behind. Its faults
are test_zookeeper_faults.

Fixtures: zookeeper_server.py (servers, the tree and the sessions as the server sees them) and
curator_peer.py (Apache Curator's InterProcessMutex and InterProcessSemaphoreV2 as peers)."""

import collections
import contextlib
import json
import os
import re
import socket
import subprocess
import threading
import time
import unittest

from curator_peer import CuratorHolder, missing as curator_missing, start_mutex, start_semaphore
from harness import (LOCK, SLOW, ArrivalOrder, Fleet, LockTestCase, OperatorFlags, StatusWatch, ThreeSlots, lock_loop, max_overlap,
                     read_file, send, signal, wait_for)
from fault_proxy import FaultProxy
from health_checks import HealthChecks
from zk_frames import RequestLog, zk_created_path
from zookeeper_server import ZooKeeperServer, four_letter, missing as zookeeper_missing

MISSING = zookeeper_missing()
CURATOR_MISSING = MISSING or curator_missing()

UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
LOCK_NODE = rf"_c_{UUID}-lock-[0-9]{{10}}"
LEASE_NODE = rf"_c_{UUID}-lease-[0-9]{{10}}"
# One write(2) per line on an O_APPEND descriptor, so concurrent lines never interleave; Curator's
# peers write the same lines (curator_peer.py).
LOGGED = 'echo "enter $ID" >> "$LOG"; sleep 0.005; echo "exit $ID" >> "$LOG"'


@unittest.skipIf(MISSING, MISSING)
class ZooKeeperCase(LockTestCase):
    """One server for the class; each test a prefix of its own, and a baseline of the sessions
    that earlier tests may have left to expire (a killed lock, a killed Curator)."""

    # Ticks of 500 ms: the server grants 1 s to 10 s, so lock's default 10 s is granted as asked.
    SERVER = {"tick_time": 500}

    @classmethod
    def setUpClass(cls):
        cls.zk = ZooKeeperServer(**cls.SERVER).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.zk.__exit__(None, None, None)

    def setUp(self):
        super().setUp()
        self.prefix = self.id().rsplit(".", 1)[1]
        self.node = "/" + self.prefix
        self.env.update(LOCK_BACKEND="zookeeper", ZOOKEEPER_ENDPOINTS=self.zk.connect_string)
        self.sessions_before = self.zk.sessions()

    # What the server has.

    def ephemerals_below(self, path=None):
        """{path: (data, stat)} of the ephemeral nodes below `path` (default: the test's prefix)."""
        return {p: got for p, got in self.zk.tree(path or self.node).items() if got[1].ephemeralOwner}

    def new_sessions(self):
        return self.zk.sessions() - self.sessions_before

    def assert_nothing_left(self, timeout=3.0):
        """No ephemeral node below the prefix and no session of ours. lock deletes its nodes and
        closes its session before it exits, so this holds at once; the short wait covers the
        server's pipeline and Curator's JVMs, which close their sessions as they exit."""
        wait_for(lambda: not self.ephemerals_below() and not self.new_sessions(), timeout,
                 "no ephemeral node and no session to be left")

    def assert_reaped(self, path=None):
        """The server deletes emptied container parents (checkIntervalMs=1000), one level a check."""
        path = path or self.node
        wait_for(lambda: self.zk.exists(path) is None, 10, f"the server to reap {path}")

    def wait_children(self, path, count, what=None):
        """Waits until `path` has `count` children; returns their names, sorted."""
        return wait_for(lambda: (lambda c: c if len(c) == count else None)(self.zk.children(path)),
                        what=what or f"{path} to have {count} children")

    def child_env(self, name="env"):
        """The environment a child wrote with `env > file`."""
        text = self.wait_file(name, "CONSUL_LOCK_HELD=")
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def env_to(self, name="env"):
        return f"env > {self.path(name)}.tmp && mv {self.path(name)}.tmp {self.path(name)}; "

    def status(self, *args, prefix=None):
        return self.run_lock("-status", *args, prefix or self.prefix)

    def watchers(self, path):
        """Sessions with a watch on `path`, as the server lists them (wchp)."""
        return {session for p, session in self._watches("wchp") if p == path}

    def watches_of(self, session):
        """Paths that `session` watches, as the server lists them (wchc)."""
        return {p for p, s in self._watches("wchc") if s == session}

    def _watches(self, word):
        """(path, session) pairs from wchp (a path, then its sessions indented) or wchc (a
        session, then its paths indented)."""
        pairs, head = [], None
        for line in four_letter(self.zk.port, word).splitlines():
            if not line.strip():
                continue
            if not line.startswith("\t"):
                head = line.strip()
            elif word == "wchp":
                pairs.append((head, int(line.strip(), 16)))
            else:
                pairs.append((line.strip(), int(head, 16)))
        return pairs


class LayoutTest(ZooKeeperCase):
    def test_mutex_node_owner_token_timeout_and_container_parents(self):
        prefix = self.prefix + "/inner"
        holder = self.hold("-verbose", prefix=prefix, before=self.env_to())
        env = self.child_env()
        (path, (data, stat)), = self.ephemerals_below().items()
        self.assertRegex(path, rf"^/{prefix}/{LOCK_NODE}$")
        session = int(env["LOCK_SESSION"], 16)
        self.assertEqual((env["LOCK_KEY"], env["LOCK_PREFIX"], env["CONSUL_LOCK_HELD"]),
                         (path, prefix, "true"))
        self.assertEqual(int(env["LOCK_FENCING_TOKEN"]), stat.czxid)
        self.assertEqual(stat.ephemeralOwner, session)
        record = json.loads(data)
        self.assertEqual((record["pid"], record["limit"], record["prefix"], record["host"]),
                         (holder.pid, 1, prefix, socket.gethostname()))
        # The server's view: one session, ours, owning that node alone, with the timeout asked.
        self.assertEqual(self.new_sessions(), {session})
        self.assertEqual(self.zk.ephemerals()[session], [path])
        self.assertEqual([c["to"] for c in self.zk.connections() if c["sid"] == session], [10000])
        for parent in (self.node, "/" + prefix):
            self.assertEqual(self.zk.get(parent)[1].ephemeralOwner, 0)  # a container shows as 0
        self.release()
        code, _, err = self.finish(holder)
        self.assertEqual(code, 0, err)
        self.assertIn(f"ZooKeeper at {self.zk.connect_string} gave us session {session:x} with a "
                      "timeout of 10000ms (10000ms asked for)", err)
        self.assertNotIn("lock: ", err.replace(f"lock[{holder.pid}]: ", ""))  # no error line
        # Deleted and closed before lock exited, not left to the session's timeout.
        self.assertIsNone(self.zk.exists(path))
        self.assertNotIn(session, self.zk.sessions())
        self.assert_nothing_left(timeout=0.5)
        # Both parents are containers: the server reaps them once empty.
        self.assert_reaped("/" + prefix)
        self.assert_reaped()

    def test_fencing_token_rises_when_the_parent_is_made_again(self):
        tokens, keys = [], []
        for k in range(2):
            r = self.run_lock(self.prefix, self.env_to(f"env{k}"))
            self.assertEqual((r.returncode, r.stderr), (0, ""))
            env = self.child_env(f"env{k}")
            tokens.append(int(env["LOCK_FENCING_TOKEN"]))
            keys.append(env["LOCK_KEY"])
            self.assert_reaped()
        # The sequence starts over in a new parent; the czxid does not.
        self.assertEqual([k[-10:] for k in keys], ["0000000000"] * 2)
        self.assertLess(tokens[0], tokens[1])

    def test_a_chroot_in_the_connect_string(self):
        # lock -endpoints host:port/app q takes the lock that lock on prefix app/q takes, and
        # names its node inside the chroot; the chroot itself must exist, as for any client, and
        # the error says that it does not.
        r = self.run_lock("-endpoints", self.zk.connect_string + self.node, "q", "true")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, f"lock: ZooKeeper at {self.zk.connect_string + self.node}: cannot create /q: "
                         f"the chroot {self.node} does not exist (create it, or leave it out of -endpoints)\n")
        r2 = self.run_lock("-endpoints", self.zk.connect_string + self.node, "-n", "2", "q", "true")
        self.assertEqual((r2.returncode, r2.stderr), (1, r.stderr))  # a semaphore's, the same
        self.zk.create(self.node)
        self.addCleanup(self.zk.delete, self.node, recursive=True)
        holder = self.hold(prefix=f"{self.prefix}/q")
        r = self.run_lock("-endpoints", self.zk.connect_string + self.node, "-timeout", "300ms", "q",
                          "touch " + self.path("ran"))
        self.assertEqual((r.returncode, r.stderr), (1, "lock: timed out waiting for prefix 'q'\n"))
        self.release()
        self.assert_succeeds(holder)
        r = self.run_lock("-endpoints", self.zk.connect_string + self.node, "q", self.env_to())
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertRegex(self.child_env()["LOCK_KEY"], f"^/q/{LOCK_NODE}$")
        self.assert_nothing_left()

    def test_value_is_stored_as_given(self):
        holder = self.hold("-value", "leader=web1", prefix=self.prefix)
        (data, _), = self.ephemerals_below().values()
        self.assertEqual(data, b"leader=web1")
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()

    def test_semaphore_lease_nodes_and_the_internal_mutex(self):
        holders = [self.hold("-n", "2", prefix=self.prefix, gate=f"go{k}", before=self.env_to(f"env{k}"))
                   for k in range(2)]
        envs = [self.child_env(f"env{k}") for k in range(2)]
        leases = self.node + "/leases"
        for holder, env in zip(holders, envs):
            self.assertRegex(env["LOCK_KEY"], rf"^{leases}/{LEASE_NODE}$")
            data, stat = self.zk.get(env["LOCK_KEY"])
            self.assertEqual(stat.ephemeralOwner, int(env["LOCK_SESSION"], 16))
            self.assertEqual(int(env["LOCK_FENCING_TOKEN"]), stat.czxid)
            self.assertEqual((json.loads(data)["pid"], json.loads(data)["limit"]), (holder.pid, 2))
        # The internal mutex goes as soon as a lease counts.
        self.assertEqual(self.zk.children(self.node + "/locks"), [])
        self.assertEqual(sorted(self.ephemerals_below()), sorted(e["LOCK_KEY"] for e in envs))
        # A third waits with its lease node made and the internal mutex held, as Curator does.
        waiter = self.start_lock("-n", "2", self.prefix, "touch " + self.path("ran"))
        self.wait_children(leases, 3, "the third's lease node")
        internal, = self.wait_children(self.node + "/locks", 1, "the third's internal lock node")
        self.assertRegex(internal, f"^{LOCK_NODE}$")
        owners = {stat.ephemeralOwner for _, stat in self.ephemerals_below().values()}
        self.assertEqual(len(owners), 3)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.release("go0")
        self.assert_succeeds(holders[0])
        self.assert_succeeds(waiter)
        self.assertTrue(os.path.exists(self.path("ran")))
        self.release("go1")
        self.assert_succeeds(holders[1])
        self.assert_nothing_left(timeout=0.5)
        self.assert_reaped()


class LeavingTest(ZooKeeperCase):
    """Nothing is left after -timeout or a signal while waiting, for a lock and a semaphore."""

    def fill(self, n):
        """Holders for every slot of an -n `n` prefix; returns them and the waiter's queue dir."""
        holders = [self.hold("-n", str(n), prefix=self.prefix, gate=f"go{n}.{k}") for k in range(n)]
        return holders, self.node if n == 1 else self.node + "/leases"

    def empty(self, holders, n):
        for k, holder in enumerate(holders):
            self.release(f"go{n}.{k}")
            self.assert_succeeds(holder)
        self.assert_nothing_left(timeout=0.5)

    def test_timeout_exits_1_and_leaves_nothing(self):
        for n in (1, 2):
            with self.subTest(n=n):
                holders, queue = self.fill(n)
                before = self.ephemerals_below()
                sessions = self.new_sessions()
                start = time.monotonic()
                r = self.run_lock("-n", str(n), "-timeout", "300ms", self.prefix, "touch " + self.path("ran"))
                elapsed = time.monotonic() - start
                self.assertEqual((r.returncode, r.stdout, r.stderr),
                                 (1, "", f"lock: timed out waiting for prefix '{self.prefix}'\n"))
                self.assertGreaterEqual(elapsed, 0.3)
                self.assertLess(elapsed, 0.3 + 2 * SLOW)
                self.assertFalse(os.path.exists(self.path("ran")))
                # Its node(s) deleted and its session closed before it exited.
                self.assertEqual(self.ephemerals_below(), before)
                self.assertEqual(self.new_sessions(), sessions)
                self.assertEqual(len(self.zk.children(queue)), n)
                self.empty(holders, n)

    def test_sigterm_while_waiting_exits_1_and_leaves_nothing(self):
        for n in (1, 2):
            with self.subTest(n=n):
                holders, queue = self.fill(n)
                before = self.ephemerals_below()
                sessions = self.new_sessions()
                waiter = self.start_lock("-n", str(n), self.prefix, "touch " + self.path("ran"))
                self.wait_children(queue, n + 1, "the waiter to queue")
                start = time.monotonic()
                send(waiter, signal.SIGTERM)
                code, out, err = self.finish(waiter)
                self.assertLess(time.monotonic() - start, 2 * SLOW)
                self.assertEqual((code, out, err),
                                 (1, "", "lock: interrupted by SIGTERM while waiting for the lock\n"))
                self.assertFalse(os.path.exists(self.path("ran")))
                self.assertEqual(self.ephemerals_below(), before)
                self.assertEqual(self.new_sessions(), sessions)
                self.empty(holders, n)


class UnusedParentsTest(ZooKeeperCase):
    """The parents of our node are containers, which the server reaps only once they had a child:
    those made for a node that a signal then kept from being made would stay for good. A SIGTERM
    as the create of the last parent goes out, before its answer can come back, leaves none."""

    def test_a_signal_as_the_parents_are_made_leaves_none_of_them(self):
        for n, prefix, last in ((1, f"{self.prefix}/a/b", f"/{self.prefix}/a/b"),
                                (2, f"{self.prefix}/c", f"/{self.prefix}/c/locks")):
            with self.subTest(n=n):
                started, signalled = threading.Event(), []
                log = RequestLog()
                note = log.on_frame

                def on_frame(connection, body):
                    note(connection, body)
                    if zk_created_path(body) == last and not signalled:
                        started.wait(10)
                        signalled.append(send(waiter, signal.SIGTERM))
                log.on_frame = on_frame
                host, port = self.zk.connect_string.rsplit(":", 1)
                with FaultProxy(host, int(port), on_upstream=log.feed) as proxy:
                    waiter = self.start_lock("-endpoints", proxy.address, "-n", str(n), prefix,
                                             "touch " + self.path("ran"))
                    started.set()
                    code, _, err = self.finish(waiter)
                self.assertTrue(signalled, log.requests())
                self.assertEqual((code, err),
                                 (1, "lock: interrupted by SIGTERM while waiting for the lock\n"))
                self.assertFalse(os.path.exists(self.path("ran")))
                # Removed by lock, or (when its node's create went out before the signal came)
                # reaped by the server once that node went with the session.
                self.assert_reaped(self.node)
                self.assert_nothing_left()


class QueueTest(ArrivalOrder, ZooKeeperCase):
    def wait_waiting(self, count):
        self.wait_children(self.node, count + 1, f"{count} waiters to queue")

    def test_a_waiter_watches_only_the_node_ahead(self):
        holder = self.hold(prefix=self.prefix)
        first = self.start_lock(self.prefix, "touch " + self.path("first"))
        self.wait_children(self.node, 2)
        second = self.start_lock(self.prefix, "touch " + self.path("second"))
        self.wait_children(self.node, 3)
        # No herd: the second watches the first's node, not the holder's. (Its own comes with
        # the lease keeper's look, every TTL/2 while it waits.)
        queue = sorted(self.ephemerals_below().items(), key=lambda item: item[1][1].czxid)
        (held, _), (ahead, _), (last, (_, stat)) = queue
        wait_for(lambda: self.watches_of(stat.ephemeralOwner) - {last} == {ahead}, 10,
                 "the second waiter to watch the node ahead of it")
        # When the first leaves, it moves up behind the holder, and gets in after it.
        send(first, signal.SIGTERM)
        self.assertEqual(self.finish(first)[0], 1)
        wait_for(lambda: self.watches_of(stat.ephemeralOwner) - {last} == {held}, 10,
                 "the second waiter to watch the holder's node")
        self.assert_running(second)
        self.release()
        self.assert_succeeds(holder)
        self.assert_succeeds(second)
        self.assertEqual((os.path.exists(self.path("first")), os.path.exists(self.path("second"))),
                         (False, True))
        self.assert_nothing_left()

    def test_semaphore_waiters_in_order_listed_and_one_leaving(self):
        # The first waiter holds the internal mutex and has its lease node; the others queue on
        # the internal mutex, and -status lists them all in that order.
        locks, leases = self.node + "/locks", self.node + "/leases"
        holders = [self.hold("-n", "2", prefix=self.prefix, gate=f"go{k}") for k in range(2)]
        order = self.path("order")
        waiters = []
        for k in range(3):
            waiters.append(self.start_lock("-n", "2", "-name", f"w{k}", self.prefix,
                                           f"echo {k} >> {order}; while [ ! -e {self.path(f'wgo{k}')} ]; "
                                           "do sleep 0.01; done"))
            self.wait_children(locks, k + 1, f"waiter {k} to queue")
        self.assertEqual(len(self.zk.children(leases)), 3)
        got = json.loads(self.status("-json").stdout)
        self.assertEqual([w["name"] for w in got["waiters"]], ["w0", "w1", "w2"])
        send(waiters[1], signal.SIGTERM)
        self.assertEqual(self.finish(waiters[1])[0], 1)
        self.assertEqual(len(self.zk.children(locks)), 2)
        for k, entered in ((0, "0"), (1, "2")):
            self.release(f"go{k}")  # a slot frees: the next waiter in line takes it
            self.assert_succeeds(holders[k])
            self.wait_file("order", f"{entered}\n")
        self.assertEqual(read_file(order).split(), ["0", "2"])
        for k in (0, 2):
            self.release(f"wgo{k}")
            self.assert_succeeds(waiters[k])
        self.assert_nothing_left()


class LimitTest(ThreeSlots, ZooKeeperCase):
    RACE = (6, 6)

    def test_limit_conflict_and_lock_semaphore_conflict(self):
        holder = self.hold("-n", "2", prefix=self.prefix)
        r = self.run_lock("-n", "3", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "lock: semaphore limit conflict (lock: 2, local: 3)\n")
        r = self.run_lock(self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, "^lock: Existing key does not match lock use "
                         rf"\({self.node}/(leases|locks) is a semaphore's\)\n$")
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assertEqual(len(self.ephemerals_below()), 1)  # the refused left nothing
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left(timeout=0.5)

        holder = self.hold(prefix=self.prefix, gate="release-lock")
        r = self.run_lock("-n", "2", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, "^lock: Existing key does not match semaphore use "
                         rf"\({self.node}/{LOCK_NODE} is a lock's\)\n$")
        self.assertEqual(len(self.ephemerals_below()), 1)
        self.release("release-lock")
        self.assert_succeeds(holder)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_nothing_left(timeout=0.5)

class RoundTripTest(ZooKeeperCase):
    """Requests and connections per acquisition and release on a new prefix, counted by a proxy
    in front of the server, so that they cannot grow unnoticed. Pings, which depend on time
    alone, are not counted. Each create of our node is tried once before its parents exist
    (Curator's creatingParentContainersIfNeeded does the same) and the parents are made from the
    root down, except a semaphore's leases/, whose parent is known to be there. The session
    lasts 40 s (2 s ticks), so that no renewal comes among them, however slow the run."""

    SERVER = {"tick_time": 2000}

    def round_trips(self, *flags, prefix=None):
        log = RequestLog()
        host, port = self.zk.connect_string.rsplit(":", 1)
        with FaultProxy(host, int(port), on_upstream=log.feed) as proxy:
            r = self.run_lock("-endpoints", proxy.address, "-session-ttl", "40s", *flags,
                              prefix or self.prefix, "true")
            self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assert_nothing_left()
        seen = log.requests()
        return [op for _, op in seen], len({c for c, _ in seen})

    def test_mutex(self):
        ops, connections = self.round_trips()
        self.assertEqual(ops, ["connect", "create2", "createContainer", "create2", "getChildren2",
                               "exists",  # the watch on our node, once it holds
                               "delete", "closeSession"])
        self.assertEqual(connections, 1)

    def test_semaphore(self):
        ops, connections = self.round_trips("-n", "3")
        self.assertEqual(ops, [
            "connect",
            "create2", "createContainer", "createContainer", "create2", "getChildren2",  # locks
            "getChildren2",  # no lock of -n 1 under the prefix
            "create2", "createContainer", "create2", "exists", "getChildren2",  # leases
            "delete",  # the internal mutex, before the child starts
            "delete", "closeSession"])
        self.assertEqual(connections, 1)

    def test_semaphore_below_a_deeper_prefix(self):
        """Every level of the prefix is made once, for locks/; leases/ is made alone."""
        ops, connections = self.round_trips("-n", "3", prefix=f"{self.prefix}/a/b")
        self.assertEqual(ops, [
            "connect",
            "create2", "createContainer", "createContainer", "createContainer", "createContainer",
            "create2", "getChildren2",  # locks
            "getChildren2",
            "create2", "createContainer", "create2", "exists", "getChildren2",  # leases
            "delete",
            "delete", "closeSession"])
        self.assertEqual(connections, 1)


class FleetTest(Fleet, ZooKeeperCase):
    """A fleet's cron job: N contenders queued on one prefix at once. What each costs the server
    stays what one waiter costs, however long the line: counted by a proxy in front of the
    server, pings apart (the C client's own, on time alone)."""

    def test_requests_per_contender_do_not_grow_with_the_line(self):
        log = RequestLog()
        host, port = self.zk.connect_string.rsplit(":", 1)
        with FaultProxy(host, int(port), on_upstream=log.feed) as proxy:
            flags = ["-endpoints", proxy.address]
            holder = self.hold(*flags, prefix=self.prefix)
            started = time.monotonic()
            procs = [self.start_lock(*flags, self.prefix, "true") for _ in range(self.N)]
            self.wait_children(self.node, self.N + 1, "every contender to queue")
            # A waiter's keeper looks its node up every 3 s (zk_lease.cpp), a holder's every
            # 500 ms (lease_budget.hpp): in 2 s of the line waiting, each waiter once at most.
            before = len(log.requests())
            time.sleep(2)
            self.assertLessEqual(len(log.requests()) - before, self.N + 5)
            self.release()
            self.assert_succeeds(holder)
            for p in procs:
                self.assert_succeeds(p)
            waited = time.monotonic() - started
        self.assert_nothing_left()
        ops = collections.Counter(op for _, op in log.requests())
        n = self.N + 1
        self.assertEqual((ops["connect"], ops["delete"], ops["closeSession"]), (n, n, n), dict(ops))
        # One look at the line per wake, and the only wake is the node ahead going.
        self.assertLessEqual(ops["getChildren2"], 2 * n, dict(ops))
        # Each waiter: connect, create, the line, a watch on the node ahead, the line again once
        # it goes (whose answer confirms the session as a renewal would), the watch on its own
        # node (set by the keeper's look while it waited, else at its turn), the delete, the
        # close: 8. And, with time alone, its keeper's looks, every 3 s, and a look at the node
        # ahead after 10 quiet seconds (a slow build waits long for 51 processes to start). The
        # first holder made the containers and renewed as it held; the constant covers it.
        by_time = n * int(waited / 3 + waited / 10 + 1)
        self.assertLessEqual(sum(ops.values()), 8 * n + by_time + 20, (dict(ops), waited))


class StatusTest(ZooKeeperCase):
    def test_free_prefix_exits_3_and_creates_nothing(self):
        root = self.zk.get("/")[1]
        for args, out in (((), f"prefix '{self.prefix}': not held\n"), (("-json",), None)):
            r = self.status(*args)
            self.assertEqual((r.returncode, r.stderr), (3, ""))
            if out is not None:
                self.assertEqual(r.stdout, out)
            else:
                got = json.loads(r.stdout)
                self.assertEqual((got["prefix"], got["backend"], got["held"], got["holders"], got["waiters"]),
                                 (self.prefix, "zookeeper", False, [], []))
        self.assertIsNone(self.zk.exists(self.node))
        self.assertEqual(self.zk.get("/")[1].cversion, root.cversion)  # no node made under / since
        self.assert_nothing_left(timeout=0.5)  # its session closed
        # A prefix whose container parent is still there, emptied, is free too.
        r = self.run_lock(self.prefix, "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        if self.zk.exists(self.node):
            self.assertEqual(self.status().returncode, 3)

    def test_lists_holder_and_waiters_with_their_records(self):
        holder = self.hold("-name", "nightly backup", prefix=self.prefix)
        waiter = self.start_lock("-name", "second", self.prefix, "true")
        self.wait_children(self.node, 2, "the waiter to queue")
        nodes = {json.loads(d)["pid"]: s for d, s in self.ephemerals_below().values()}
        r = self.status()
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, f"prefix '{self.prefix}': held (lock)\n"
                         f"  holder: pid {holder.pid} on {socket.gethostname()} since "
                         f"{self.since(r.stdout, 0)}, name 'nightly backup', "
                         f"fencing token {nodes[holder.pid].czxid}\n"
                         f"  waiting: pid {waiter.pid} on {socket.gethostname()} since "
                         f"{self.since(r.stdout, 1)}, name 'second'\n")
        r = self.status("-json")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        got = json.loads(r.stdout)
        self.assertEqual((got["prefix"], got["backend"], got["limit"], got["held"]),
                         (self.prefix, "zookeeper", 1, True))
        self.assertEqual([(h["pid"], h["name"], h["token"]) for h in got["holders"]],
                         [(holder.pid, "nightly backup", nodes[holder.pid].czxid)])
        self.assertEqual([(w["pid"], w["name"]) for w in got["waiters"]], [(waiter.pid, "second")])
        self.assertEqual(len(self.zk.children(self.node)), 2)  # -status made nothing
        self.release()
        self.assert_succeeds(holder)
        self.assert_succeeds(waiter)
        self.assert_nothing_left()
        self.assertEqual(self.status().returncode, 3)

    def test_semaphore_holders_and_waiter(self):
        holders = [self.hold("-n", "2", prefix=self.prefix, gate=f"go{k}") for k in range(2)]
        waiter = self.start_lock("-n", "2", "-name", "third", self.prefix, "true")
        self.wait_children(self.node + "/leases", 3, "the third's lease node")
        r = self.status("-json")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        got = json.loads(r.stdout)
        self.assertEqual((got["limit"], got["held"]), (2, True))
        self.assertEqual(sorted(h["pid"] for h in got["holders"]), sorted(h.pid for h in holders))
        self.assertEqual([(w["pid"], w["name"]) for w in got["waiters"]], [(waiter.pid, "third")])
        r = self.status()
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith(f"prefix '{self.prefix}': held (semaphore, 2 of 2 slots "
                                            "taken)\n"), r.stdout)
        self.assertEqual([line.split()[0] for line in r.stdout.splitlines()[1:]],
                         ["holder:", "holder:", "waiting:"])
        for k, h in enumerate(holders):
            self.release(f"go{k}")
            self.assert_succeeds(h)
        self.assert_succeeds(waiter)
        self.assert_nothing_left()

    def test_status_of_a_lock_beside_a_semaphores_empty_leftovers(self):
        self.zk.create(self.node + "/leases", makepath=True)
        self.addCleanup(self.zk.delete, self.node, recursive=True)
        holder = self.hold(prefix=self.prefix)
        self.assertEqual(len(self.ephemerals_below()), 1)
        r = self.status("-json")
        self.release()
        self.assert_succeeds(holder)
        self.assertEqual(r.returncode, 0, r.stdout)
        got = json.loads(r.stdout)
        self.assertEqual([h["pid"] for h in got["holders"]], [holder.pid])

    @staticmethod
    def since(text, index):
        return re.findall(r"since (\S+Z)", text)[index]


@unittest.skipIf(CURATOR_MISSING, CURATOR_MISSING)
class CuratorInteropTest(ZooKeeperCase):
    def curator(self, **kwargs):
        holder = CuratorHolder(self.zk.connect_string, self.node, **kwargs).__enter__()
        self.addCleanup(holder.__exit__, None, None, None)
        return holder

    def test_lock_waits_behind_interprocessmutex(self):
        curator = self.curator().wait_acquired()
        waiter = self.start_lock(self.prefix, "touch " + self.path("ran"))
        names = self.wait_children(self.node, 2, "lock to queue behind Curator")
        theirs = curator.node.rsplit("/", 1)[1]
        ours, = set(names) - {theirs}
        self.assertLess(theirs[-10:], ours[-10:])  # behind it in Curator's order
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_running(waiter)
        self.assertEqual(curator.release(), 0)
        self.assert_succeeds(waiter)
        self.assertTrue(os.path.exists(self.path("ran")))
        self.assert_nothing_left()

    def test_interprocessmutex_waits_behind_lock(self):
        holder = self.hold(prefix=self.prefix)
        curator = self.curator()
        self.wait_children(self.node, 2, "Curator to queue behind lock")
        self.assertFalse(curator.acquired())
        self.release()
        self.assert_succeeds(holder)
        curator.wait_acquired()
        self.assertRegex(curator.node, f"^{self.node}/{LOCK_NODE}$")
        self.assertEqual(curator.release(), 0)
        self.assert_nothing_left()

    def test_lock_and_curator_rounds_never_overlap(self):
        rounds = 6
        log = self.path("log")
        procs = []
        for n in range(3):
            procs.append(start_mutex(self.zk.connect_string, self.node, rounds, 5, log))
            procs.append(subprocess.Popen(["/bin/sh", "-c", lock_loop(rounds)], stdin=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True,
                                          env=dict(self.env, LOCK=LOCK, P=self.prefix, CHILD=LOGGED,
                                                   LOG=log, ID=f"lock-{n}")))
        self.procs += procs
        for p in procs:
            _, err = p.communicate(timeout=120 * SLOW)
            self.assertEqual((p.returncode, err), (0, ""), p.args)
        lines = read_file(log).splitlines()
        self.assertEqual(len(lines), 2 * 6 * rounds)
        self.assertEqual(sum(line.startswith("enter curator-") for line in lines), 3 * rounds)
        self.assertEqual(max_overlap(log), 1)
        self.assert_nothing_left()

    def test_semaphore_mixed_with_interprocesssemaphorev2_never_exceeds_3(self):
        rounds = 5
        log = self.path("log")
        child = 'echo "enter $ID" >> "$LOG"; sleep 0.05; echo "exit $ID" >> "$LOG"'
        procs = []
        for n in range(3):
            procs.append(start_semaphore(self.zk.connect_string, self.node, 3, rounds, 50, log))
            procs.append(subprocess.Popen(["/bin/sh", "-c", lock_loop(rounds, "-n", "3")],
                                          stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                          env=dict(self.env, LOCK=LOCK, P=self.prefix, CHILD=child,
                                                   LOG=log, ID=f"lock-{n}")))
        self.procs += procs
        for p in procs:
            _, err = p.communicate(timeout=120 * SLOW)
            self.assertEqual((p.returncode, err), (0, ""), p.args)
        self.assertEqual(len(read_file(log).splitlines()), 2 * 6 * rounds)
        self.assertLessEqual(max_overlap(log), 3)  # that 3 do hold at once: the next test
        self.assert_nothing_left()

    def test_three_mixed_leases_hold_and_a_fourth_of_either_waits(self):
        leases = self.node + "/leases"
        locks = [self.hold("-n", "3", prefix=self.prefix, gate=f"go{k}") for k in range(2)]
        curators = [self.curator(leases=3).wait_acquired()]
        self.assertRegex(curators[0].node, f"^{leases}/{LEASE_NODE}$")
        # A fourth lock times out; a fourth Curator waits.
        r = self.run_lock("-n", "3", "-timeout", "300ms", self.prefix, "touch " + self.path("ran"))
        self.assertEqual((r.returncode, r.stderr), (1, f"lock: timed out waiting for prefix '{self.prefix}'\n"))
        self.assertFalse(os.path.exists(self.path("ran")))
        curators.append(self.curator(leases=3))
        self.wait_children(leases, 4, "the fourth Curator's lease node")
        r = self.status("-json")
        got = json.loads(r.stdout)
        self.assertEqual((r.returncode, got["limit"], len(got["holders"]), len(got["waiters"])), (0, 3, 3, 1))
        self.assertFalse(curators[1].acquired())
        # A lock leaves: the waiting Curator gets its lease.
        self.release("go0")
        self.assert_succeeds(locks[0])
        curators[1].wait_acquired()
        # 1 lock + 2 Curators: a lock waits until a Curator leaves.
        waiter = self.start_lock("-n", "3", self.prefix, "touch " + self.path("fourth"))
        self.wait_children(leases, 4, "the waiting lock's lease node")
        self.assertFalse(os.path.exists(self.path("fourth")))
        self.assertEqual(curators[0].release(), 0)
        self.assert_succeeds(waiter)
        self.assertTrue(os.path.exists(self.path("fourth")))
        self.release("go1")
        self.assert_succeeds(locks[1])
        self.assertEqual(curators[1].release(), 0)
        self.assert_nothing_left()

    def test_status_counts_curators_holders_and_waiters(self):
        curator = self.curator().wait_acquired()
        waiter = self.start_lock("-name", "behind curator", self.prefix, "true")
        self.wait_children(self.node, 2)
        other = self.curator()
        self.wait_children(self.node, 3)
        r = self.status("-json")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        got = json.loads(r.stdout)
        self.assertEqual((got["limit"], got["held"], len(got["holders"]), len(got["waiters"])), (1, True, 1, 2))
        self.assertEqual(got["holders"][0]["token"], self.zk.get(curator.node)[1].czxid)
        self.assertEqual(got["waiters"][0]["pid"], waiter.pid)
        self.assertEqual(got["waiters"][0]["name"], "behind curator")
        r = self.status()
        self.assertEqual(r.returncode, 0)
        self.assertEqual(len(r.stdout.splitlines()), 4, r.stdout)
        self.assertEqual(curator.release(), 0)
        self.assert_succeeds(waiter)
        other.wait_acquired()
        self.assertEqual(other.release(), 0)
        self.assert_nothing_left()

    def test_status_of_a_curator_semaphore(self):
        curators = [self.curator(leases=2).wait_acquired() for _ in range(2)]
        r = self.status("-json")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        got = json.loads(r.stdout)
        self.assertEqual((got["held"], len(got["holders"]), got["waiters"]), (True, 2, []))
        self.assertEqual(sorted(h["token"] for h in got["holders"]),
                         sorted(self.zk.get(c.node)[1].czxid for c in curators))
        for c in curators:
            self.assertEqual(c.release(), 0)
        self.assert_nothing_left()

    def test_status_of_a_curator_semaphore_with_one_lease_says_semaphore(self):
        curator = self.curator(leases=3).wait_acquired()
        r = self.status()
        self.assertEqual(curator.release(), 0)
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout.splitlines()[0], r": held \(semaphore, ")


class StatusWatchTest(StatusWatch, ZooKeeperCase):
    """-status -watch: watches on every node read, set again at each event. Pings count."""

    @contextlib.contextmanager
    def proxy(self):
        log = RequestLog(pings=True)
        host, port = self.zk.connect_string.rsplit(":", 1)
        with FaultProxy(host, int(port), on_upstream=log.feed) as proxy:
            yield proxy, lambda: [r for _, r in log.requests()], ["-endpoints", proxy.address]


class OperatorsTest(OperatorFlags, ZooKeeperCase):
    BACKEND = "zookeeper"

    def lose(self):
        (node, _), = self.ephemerals_below().items()
        self.zk.delete(node)


class ZooKeeperHealthChecksTest(HealthChecks, ZooKeeperCase):
    BACKEND = "zookeeper"


if __name__ == "__main__":
    unittest.main()
