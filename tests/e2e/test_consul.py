"""The Consul backend against the Consul HTTP API double (tests/consul_double): the keys, flags,
sessions and JSON that Consul's own Go client reads, exclusion shared with that client (the
consul_peer.py port of api.Lock, api.Semaphore and `consul lock`), conflicts in Consul's wording,
loss of the session, 5xx periods, a partition against the lease-safe deadline, ACL tokens, TLS
and a unix socket, and nothing left behind."""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest
import urllib.parse

from fault_proxy import FaultProxy, HttpRequestLog
from harness import (LOCK, SLOW, LockTestCase, OperatorFlags, StatusWatch, ThreeSlots, max_overlap,
                     pid_alive, read_file, wait_for)
from health_checks import HealthChecks

CONSUL_DOUBLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "consul_double")
sys.path.insert(0, CONSUL_DOUBLE_DIR)
from fixture import ConsulDouble  # noqa: E402
from godur import parse_duration  # noqa: E402
from notify_socket import NotifiesWhileWaiting  # noqa: E402

PEER = os.path.join(CONSUL_DOUBLE_DIR, "consul_peer.py")

LOCK_FLAGS = 0x2DDCCBC058A50C18  # api.LockFlagValue, 3304740253564472344
SEMAPHORE_FLAGS = 0xE0F69A2BAA414DE0  # api.SemaphoreFlagValue, 16210313421097356768

# One write(2) per line on an O_APPEND descriptor, so concurrent lines never interleave.
LOGGED = 'echo "enter $ID" >> "$LOG"; echo "exit $ID" >> "$LOG"'
LOGGED_SLOW = 'echo "enter $ID" >> "$LOG"; sleep 0.05; echo "exit $ID" >> "$LOG"'

# Consul's own wording (api/lock.go, api/semaphore.go); the Go source writes the limit conflict
# in lower case, so that one is matched without regard to case.
LOCK_CONFLICT = "Existing key does not match lock use"
SEMAPHORE_CONFLICT = "Existing key does not match semaphore use"


def limit_conflict(lock, local):
    return re.compile(rf"(?i)semaphore limit conflict \(lock: {lock}, local: {local}\)")


class ConsulTestCase(LockTestCase):
    """One double per class; each test works under a prefix of its own and judges what it left
    by the sessions that appeared during it, so a session an earlier test could not clean up
    (its lock exited while the double failed) does not count against it."""

    double_options = {}
    token = None  # the token the checks read the double with

    @classmethod
    def setUpClass(cls):
        cls.consul = ConsulDouble(**cls.double_options).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.consul.__exit__(None, None, None)

    def setUp(self):
        super().setUp()
        self.env["CONSUL_HTTP_ADDR"] = self.consul.http_addr
        for var in ("CONSUL_HTTP_TOKEN", "CONSUL_HTTP_TOKEN_FILE", "CONSUL_HTTP_SSL",
                    "CONSUL_HTTP_SSL_VERIFY", "CONSUL_CACERT", "CONSUL_CAPATH",
                    "CONSUL_CLIENT_CERT", "CONSUL_CLIENT_KEY", "CONSUL_TLS_SERVER_NAME"):
            self.env.pop(var, None)
        self.prefix = self.id().rsplit(".", 1)[1]
        self.sessions_before = self.session_ids()
        self.child_pids = []  # children that ignore SIGTERM, ended here if a test fails

    def tearDown(self):
        # SIGTERM first, so that lock and the peer stop their children before the harness
        # SIGKILLs whatever is left.
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.child_pids:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        super().tearDown()

    # ---- what the double holds ------------------------------------------------------------

    def session_ids(self):
        return {s["ID"] for s in self.consul.sessions(token=self.token)}

    def new_sessions(self):
        return self.session_ids() - self.sessions_before

    def wait_new_sessions(self, count):
        """Waits until exactly `count` sessions appeared during the test; returns their IDs."""
        def settled():
            found = self.new_sessions()
            return found if len(found) == count else None
        return wait_for(settled, what=f"{count} new session(s)")

    def the_new_session(self):
        return next(iter(self.wait_new_sessions(1)))

    def wait_waiting(self, count):
        """Waits for the `count`-th session of the test and then for a blocking query (one with
        an index) that arrived after that session was made: the newcomer found the prefix taken
        and waits on it."""
        self.wait_new_sessions(count)
        made = max(q["seq"] for q in self.consul.requests() if q["path"] == "/v1/session/create")
        wait_for(lambda: any(q["seq"] > made and q["method"] == "GET" and
                             re.search(r"(^|&)index=", q["query"])
                             for q in self.consul.requests()),
                 what="the newcomer to wait with a blocking query")

    def kv(self, prefix=None):
        """The entries below the prefix, values decoded to bytes."""
        return self.consul.get((prefix or self.prefix) + "/", token=self.token, recurse=True) or []

    def entry(self, key):
        found = self.consul.get(key, token=self.token)
        return found[0] if found else None

    def assert_nothing_left(self, prefix=None):
        wait_for(lambda: not self.kv(prefix) and not self.new_sessions(),
                 what="no key under the prefix and no session of ours to be left")

    # ---- processes ------------------------------------------------------------------------

    def start_peer(self, *args, env=None):
        """consul_peer.py, the Go client's `consul lock`, with the test's environment."""
        p = subprocess.Popen([sys.executable, PEER, *args], env=env or self.env, text=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def hold_peer(self, *flags, prefix, gate):
        """A peer whose child stays until release(gate); returns it once the child runs."""
        held = self.path(f"held.{gate}")
        child = f"touch {held}; while [ ! -e {self.path(gate)} ]; do sleep 0.01; done"
        peer = self.start_peer(*flags, prefix, child)
        wait_for(lambda: os.path.exists(held) or peer.poll() is not None,
                 what="the peer's child to start")
        if peer.poll() is not None:
            self.fail(f"the peer ended early: {self.finish(peer)}")
        return peer

    def run_peer(self, *args):
        return subprocess.run([sys.executable, PEER, *args], env=self.env, text=True,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=60)

    def mixed_contenders(self, n, contenders, rounds, child):
        """`contenders` shell loops, odd ones running lock and even ones the Go client's
        `consul lock`, each `rounds` times on the prefix with -n n (half as many under the
        sanitizers, whose every start is slow); returns the log path."""
        rounds = rounds if SLOW == 1 else (rounds + 1) // 2
        log = self.path("log")
        lock_loop = (f'i=0; while [ $i -lt {rounds} ]; do "$LOCK" -n {n} "$P" "$CHILD" || exit $?; '
                     'i=$((i+1)); done')
        peer_loop = (f'i=0; while [ $i -lt {rounds} ]; do "$PY" "$PEER" -n {n} "$P" "$CHILD" '
                     '|| exit $?; i=$((i+1)); done')
        procs = []
        for k in range(contenders):
            env = dict(self.env, LOCK=LOCK, PY=sys.executable, PEER=PEER, P=self.prefix,
                       CHILD=child, LOG=log, ID=str(k))
            p = subprocess.Popen(["/bin/sh", "-c", lock_loop if k % 2 else peer_loop], env=env,
                                 stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            self.procs.append(p)
            procs.append(p)
        for k, p in enumerate(procs):
            _, err = p.communicate(timeout=120 * SLOW)
            self.assertEqual(p.returncode, 0,
                             f"contender {k} ({'lock' if k % 2 else 'peer'}) failed: {err}")
        self.assertEqual(len(read_file(log).splitlines()), 2 * contenders * rounds)
        return log

    def child_env_dump(self):
        return (f'echo "$CONSUL_LOCK_HELD $LOCK_PREFIX $LOCK_KEY $LOCK_FENCING_TOKEN '
                f'$LOCK_SESSION" > {self.path("env")}; ')

    def child_env(self):
        held, prefix, key, token, session = read_file(self.path("env")).split()
        return dict(held=held, prefix=prefix, key=key, token=int(token), session=session)


class ConsulLockTest(ConsulTestCase):
    def test_lock_key_session_and_child_environment(self):
        holder = self.hold("-name", "web leader", prefix=self.prefix, before=self.child_env_dump())
        env = self.child_env()
        key = f"{self.prefix}/.lock"
        self.assertEqual((env["held"], env["prefix"], env["key"]), ("true", self.prefix, key))
        entries = self.kv()
        self.assertEqual([e["Key"] for e in entries], [key])
        entry = entries[0]
        self.assertEqual(entry["Flags"], LOCK_FLAGS)
        self.assertEqual(entry["Session"], env["session"])
        self.assertEqual(entry["ModifyIndex"], env["token"])
        record = json.loads(entry["Value"])
        self.assertEqual(record["pid"], holder.pid)
        self.assertIn("host", record)
        self.assertEqual(self.new_sessions(), {env["session"]})
        info = self.consul.session_info(env["session"])
        self.assertEqual((info["Name"], info["Behavior"]), ("web leader", "release"))
        self.assertEqual(parse_duration(info["TTL"]), 15_000_000_000)
        self.assertEqual(info["LockDelay"], 15_000_000_000)
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()

    def test_session_options_and_value_are_stored_as_given(self):
        holder = self.hold("-session-ttl", "45s", "-lock-delay", "2s", "-value", "leader=web1",
                           prefix=self.prefix, before=self.child_env_dump())
        session = self.child_env()["session"]
        entry = self.entry(f"{self.prefix}/.lock")
        self.assertEqual((entry["Value"], entry["Session"]), (b"leader=web1", session))
        info = self.consul.session_info(session)
        self.assertEqual(parse_duration(info["TTL"]), 45_000_000_000)
        self.assertEqual(info["LockDelay"], 2_000_000_000)
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()

    def test_session_options_out_of_consuls_bounds_are_refused(self):
        for flags, named in ((("-session-ttl", "9s"), "(?i)session.ttl"),
                             (("-session-ttl", "25h"), "(?i)session.ttl"),
                             (("-lock-delay", "61s"), "(?i)lock.delay")):
            with self.subTest(flags=flags):
                r = self.run_lock(*flags, self.prefix, "touch " + self.path("ran"))
                self.assertNotEqual(r.returncode, 0)
                self.assertRegex(r.stderr, named)
                self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_nothing_left()

    def test_every_way_of_selecting_the_backend(self):
        bare = {k: v for k, v in self.env.items() if k != "CONSUL_HTTP_ADDR"}
        ways = {"CONSUL_HTTP_ADDR": ((), self.env),
                "-http-addr host:port": (("-http-addr", self.consul.http_addr), bare),
                "-http-addr http://": (("-http-addr", "http://" + self.consul.http_addr), bare),
                "-backend consul": (("-backend", "consul"), self.env)}
        for way, (flags, env) in ways.items():
            with self.subTest(way=way):
                self.consul.clear_requests()
                r = self.run_lock(*flags, self.prefix, f'echo "$LOCK_KEY" > {self.path("key")}',
                                  env=env)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertEqual(read_file(self.path("key")), f"{self.prefix}/.lock\n")
                self.assertTrue(any(q["path"] == f"/v1/kv/{self.prefix}/.lock"
                                    for q in self.consul.requests()))
                self.assert_nothing_left()

    def test_two_locks_exclude_each_other(self):
        holder = self.hold(prefix=self.prefix)
        waiter = self.start_lock(self.prefix, "touch " + self.path("second"))
        self.wait_waiting(2)
        self.assertFalse(os.path.exists(self.path("second")))
        self.release()
        self.assert_succeeds(holder)
        self.assert_succeeds(waiter)
        self.assertTrue(os.path.exists(self.path("second")))
        self.assert_nothing_left()

    def test_lock_waits_behind_the_go_client_and_vice_versa(self):
        peer = self.hold_peer(prefix=self.prefix, gate="go")
        waiter = self.start_lock(self.prefix, "touch " + self.path("lock-held"))
        self.wait_waiting(2)
        self.assertFalse(os.path.exists(self.path("lock-held")))
        self.release("go")
        self.assert_succeeds(peer)
        self.assert_succeeds(waiter)
        self.assertTrue(os.path.exists(self.path("lock-held")))
        self.assert_nothing_left()

        holder = self.hold(prefix=self.prefix, gate="release-lock")
        peer = self.start_peer(self.prefix, "touch " + self.path("peer-held"))
        self.wait_waiting(2)
        self.assertFalse(os.path.exists(self.path("peer-held")))
        self.release("release-lock")
        self.assert_succeeds(holder)
        self.assert_succeeds(peer)
        self.assertTrue(os.path.exists(self.path("peer-held")))
        self.assert_nothing_left()

    def test_lock_and_the_go_client_alternate_without_overlap(self):
        log = self.mixed_contenders(1, contenders=4, rounds=12, child=LOGGED)
        self.assertEqual(max_overlap(log), 1)
        self.assert_nothing_left()

    def test_timeout_leaves_nothing_of_the_waiter(self):
        holder = self.hold(prefix=self.prefix, before=self.child_env_dump())
        session = self.child_env()["session"]
        start = time.monotonic()
        r = self.run_lock("-timeout", "300ms", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, "(?i)timed out")
        self.assertGreaterEqual(time.monotonic() - start, 0.3)
        self.assertFalse(os.path.exists(self.path("ran")))
        wait_for(lambda: self.new_sessions() == {session}, what="the waiter's session to go")
        self.assertEqual([(e["Key"], e["Session"]) for e in self.kv()],
                         [(f"{self.prefix}/.lock", session)])
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()

    def test_unreachable_agent_is_an_error_naming_it(self):
        self.consul.clear_requests()
        r = self.run_lock("-http-addr", "127.0.0.1:1", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"^lock: Consul agent at 127\.0\.0\.1:1: create session: "
                                   r"cannot reach it \(.+\)\n$")
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assertEqual(self.consul.request_count(), 0)

    def test_status_names_the_holder(self):
        holder = self.hold(prefix=self.prefix)
        r = self.run_lock("-status", self.prefix)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, rf"\b{holder.pid}\b")
        self.release()
        self.assert_succeeds(holder)
        r = self.run_lock("-status", self.prefix)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assert_nothing_left()


class ConsulSemaphoreTest(ThreeSlots, ConsulTestCase):
    def test_contender_key_coordinating_key_and_child_environment(self):
        holder = self.hold("-n", "3", prefix=self.prefix, before=self.child_env_dump())
        env = self.child_env()
        session = env["session"]
        contender = f"{self.prefix}/{session}"
        self.assertEqual((env["held"], env["prefix"], env["key"]), ("true", self.prefix, contender))
        entries = {e["Key"]: e for e in self.kv()}
        self.assertEqual(sorted(entries), sorted([f"{self.prefix}/.lock", contender]))
        mine, lock = entries[contender], entries[f"{self.prefix}/.lock"]
        self.assertEqual((mine["Flags"], mine["Session"]), (SEMAPHORE_FLAGS, session))
        self.assertEqual(lock["Flags"], SEMAPHORE_FLAGS)
        self.assertNotIn("Session", lock)
        self.assertEqual(json.loads(lock["Value"]), {"Limit": 3, "Holders": {session: True}})
        self.assertEqual(env["token"], lock["ModifyIndex"])
        self.assertEqual(self.consul.session_info(session)["Behavior"], "delete")
        self.assertEqual(self.new_sessions(), {session})

        second = self.hold("-n", "3", prefix=self.prefix, gate="second")
        other = (self.new_sessions() - {session}).pop()
        holders = json.loads(self.entry(f"{self.prefix}/.lock")["Value"])
        self.assertEqual(holders, {"Limit": 3, "Holders": {session: True, other: True}})
        self.release()
        self.release("second")
        self.assert_succeeds(holder)
        self.assert_succeeds(second)
        self.assert_nothing_left()

    def test_lock_and_the_go_client_share_three_slots(self):
        log = self.mixed_contenders(3, contenders=6, rounds=10, child=LOGGED_SLOW)
        self.assertLessEqual(max_overlap(log), 3)
        self.assertGreaterEqual(max_overlap(log), 2)  # the slots were shared, not taken in turn
        self.assert_nothing_left()

    def test_conflicts_with_the_go_client(self):
        ran = "touch " + self.path("ran")
        peer = self.hold_peer("-n", "2", prefix=self.prefix, gate="go-semaphore")
        peer_session = self.the_new_session()
        keys = sorted(e["Key"] for e in self.kv())
        r = self.run_lock("-n", "3", self.prefix, ran)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, limit_conflict(2, 3))
        r = self.run_lock(self.prefix, ran)
        self.assertEqual(r.returncode, 1)
        self.assertIn(LOCK_CONFLICT, r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))
        wait_for(lambda: self.new_sessions() == {peer_session},
                 what="the refused locks' sessions to go")
        self.assertEqual(sorted(e["Key"] for e in self.kv()), keys)
        self.release("go-semaphore")
        self.assert_succeeds(peer)
        self.assert_nothing_left()

        peer = self.hold_peer(prefix=self.prefix, gate="go-lock")
        peer_session = self.the_new_session()
        r = self.run_lock("-n", "2", self.prefix, ran)
        self.assertEqual(r.returncode, 1)
        self.assertIn(SEMAPHORE_CONFLICT, r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))
        wait_for(lambda: self.new_sessions() == {peer_session},
                 what="the refused lock's session to go")
        self.assertEqual([e["Key"] for e in self.kv()], [f"{self.prefix}/.lock"])
        self.release("go-lock")
        self.assert_succeeds(peer)
        self.assert_nothing_left()

    def test_the_go_client_reads_our_keys_as_its_own(self):
        holder = self.hold("-n", "2", prefix=self.prefix, gate="semaphore")
        for flags, text in ((("-n", "3"), limit_conflict(2, 3)), ((), re.escape(LOCK_CONFLICT))):
            r = self.run_peer(*flags, self.prefix, "touch " + self.path("ran"))
            self.assertEqual(r.returncode, 1)
            self.assertRegex(r.stderr, text)
        r = self.run_lock("-n", "3", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, limit_conflict(2, 3))
        self.release("semaphore")
        self.assert_succeeds(holder)
        self.assert_nothing_left()

        holder = self.hold(prefix=self.prefix, gate="lock")
        r = self.run_peer("-n", "2", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertIn(SEMAPHORE_CONFLICT, r.stderr)
        self.release("lock")
        self.assert_succeeds(holder)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_nothing_left()

    def test_timeout_leaves_nothing_of_the_waiter(self):
        first = self.hold("-n", "2", prefix=self.prefix, gate="first")
        second = self.hold("-n", "2", prefix=self.prefix, gate="second")
        holders = self.wait_new_sessions(2)
        lock_value = self.entry(f"{self.prefix}/.lock")["Value"]
        r = self.run_lock("-n", "2", "-timeout", "300ms", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, "(?i)timed out")
        self.assertFalse(os.path.exists(self.path("ran")))
        wait_for(lambda: self.new_sessions() == holders, what="the waiter's session to go")
        self.assertEqual(sorted(e["Key"] for e in self.kv()),
                         sorted([f"{self.prefix}/.lock"] + [f"{self.prefix}/{s}" for s in holders]))
        self.assertEqual(json.loads(self.entry(f"{self.prefix}/.lock")["Value"]),
                         json.loads(lock_value))
        self.release("first")
        self.release("second")
        self.assert_succeeds(first)
        self.assert_succeeds(second)
        self.assert_nothing_left()


class ConsulNotifyTest(NotifiesWhileWaiting, ConsulTestCase):
    """systemd's notifications while waiting on Consul (the tests are NotifiesWhileWaiting's)."""

    def holder_records(self):
        # A semaphore's .lock ({"Limit": .., "Holders": ..}) is among them, with no pid.
        return [json.loads(e["Value"]) for e in self.kv()]

    def test_notify_a_waiter_keeps_waiting_through_the_lookups(self):
        # Each look at the holders is a plain read of the prefix (recursive, no index), made from
        # inside the wait on .lock's blocking query: 0.5 s into the wait and 2 s later. The second
        # finds the same holder, so it says nothing new, and the wait goes on as before.
        holder = self.hold(prefix=self.prefix, gate="go0")
        expected = self.behind(1, [holder])  # a read of our own, before the waiter starts
        w = self.start_notified_waiter(1)
        behind = self.wait_status(w, expected, self.FIRST_LOOK, w.started)

        def lookups():
            return [q for q in self.consul.requests()
                    if q["method"] == "GET" and q["path"] == f"/v1/kv/{self.prefix}/"
                    and q["at"] > w.started and not re.search(r"(^|&)index=", q["query"])]
        wait_for(lambda: len(lookups()) >= 2, self.REFRESH, "a second look at the holders")
        w.sock.sync()
        self.assert_still_waiting(w)
        self.assertEqual([d.get("STATUS") for d in w.sock.datagrams(w.proc.pid)
                          if d.get("STATUS") is not None],
                         [w.first.get("STATUS"), behind.get("STATUS")])
        self.release("go0")
        self.assert_succeeds(holder)
        self.finish_notified_waiter(w, behind.seq)
        self.assert_nothing_left()


class ConsulLossTest(ConsulTestCase):
    def tearDown(self):
        self.consul.heal()
        super().tearDown()

    def child_that_logs_term(self, gate="release"):
        return (f'trap \'date +%s.%N > {self.path("term")}; exit 0\' TERM; '
                f'echo $$ > {self.path("pid")}; '
                f'while [ ! -e {self.path(gate)} ]; do sleep 0.01; done')

    def test_destroyed_session_stops_the_child_at_once(self):
        """At once, not at a TTL's end: within 250 ms, the child's shell (which runs its trap
        once its sleep ends) and its date(1) counted, on a loaded machine."""
        for n in ("1", "3"):
            with self.subTest(n=n):
                for name in ("pid", "term"):
                    if os.path.exists(self.path(name)):
                        os.unlink(self.path(name))
                holder = self.start_lock("-n", n, "-shell=false", self.prefix, "/bin/sh", "-c",
                                         self.child_that_logs_term())
                self.wait_file("pid", "\n")
                session = self.the_new_session()
                destroyed = time.time()
                self.consul.session_destroy(session)
                self.wait_file("term", "\n")
                self.assertLess(float(read_file(self.path("term"))) - destroyed, 0.25 * SLOW)
                code, _, err = self.finish(holder)
                self.assertEqual(code, 1)
                self.assertIn("lock lost", err)
                self.assert_nothing_left()

    def test_lock_delay_after_a_lost_session_is_waited_out(self):
        # The lost holder's lock-delay keeps .lock from everyone for 2 s; a newcomer's acquire
        # fails although nobody holds the key, so it pauses (5 s, as api.Lock) and tries again.
        holder = self.start_lock("-lock-delay", "2s", "-shell=false", self.prefix, "/bin/sh", "-c",
                                 self.child_that_logs_term())
        self.wait_file("pid", "\n")
        self.consul.session_destroy(self.the_new_session())
        self.assertEqual(self.finish(holder)[0], 1)
        start = time.monotonic()
        r = self.run_lock(self.prefix, "touch " + self.path("ran"))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertGreaterEqual(time.monotonic() - start, 2 - 0.5)  # the delay, less our own exit
        self.assertTrue(os.path.exists(self.path("ran")))
        self.assert_nothing_left()

    def test_a_race_lost_to_a_holder_already_gone_is_no_lock_delay(self):
        # The waiter finds .lock free and asks for it; before its refusal comes back, another
        # session takes the key and lets it go. The waiter then finds the key free again, but
        # changed: no lock-delay, as api.Lock would take it for (pausing 5 s with the lock free),
        # but a race lost to a holder already gone. It looks again at once.
        key = f"{self.prefix}/.lock"
        first, second = self.consul.session_create(), self.consul.session_create()
        self.assertTrue(self.consul.put(key, acquire=first, flags=LOCK_FLAGS))
        waiter = self.start_lock("-verbose", self.prefix, "touch " + self.path("ran"))
        self.wait_waiting(3)
        self.consul.reply_fault(f"/v1/kv/{key}", method="PUT", query="acquire=", body="false",
                                delay_seconds=2.0)
        self.assertTrue(self.consul.put(key, release=first, flags=LOCK_FLAGS))
        asked = wait_for(lambda: next((q["at"] for q in self.consul.requests() if q["method"] == "PUT"
                                       and q["path"] == f"/v1/kv/{key}" and "acquire=" in q["query"]
                                       and first not in q["query"]), None),
                         what="the waiter's acquire")
        self.assertTrue(self.consul.put(key, acquire=second, flags=LOCK_FLAGS))
        self.assertTrue(self.consul.put(key, release=second, flags=LOCK_FLAGS))
        self.wait_file("ran")
        self.assertLess(time.monotonic() - asked, 2 + 1.5 * SLOW)  # not 2 + 5 s
        code, _, err = self.finish(waiter)
        self.assertEqual(code, 0, err)
        self.assertIn("was taken and let go before our acquire", err)
        self.assertNotIn("lock-delay", err)
        for session in (first, second):
            self.consul.session_destroy(session)
        self.assert_nothing_left()

    def test_5xx_shorter_than_the_retries_is_ridden_out(self):
        holder = self.start_lock("-monitor-retry", "3", "-shell=false", self.prefix, "/bin/sh",
                                 "-c", self.child_that_logs_term())
        pid = int(self.wait_file("pid", "\n"))
        session = self.the_new_session()
        # Every request in the next 1.5 s gets 500; cutting the open connections makes the
        # monitor's blocking query end, so lock asks again inside the window.
        self.consul.fail_5xx(1.5)
        self.consul.drop_connections()
        # The passage of time is what is under test: the window, then two more retry intervals
        # of 1 s, after which three failed retries would have given up.
        time.sleep(4.5)
        self.assertTrue(pid_alive(pid))
        self.assertFalse(os.path.exists(self.path("term")))
        self.assert_running(holder)
        self.assertEqual(self.entry(f"{self.prefix}/.lock")["Session"], session)
        self.release()
        code, _, err = self.finish(holder)
        self.assertEqual(code, 0, err)
        self.assertNotIn("lock lost", err)
        self.assert_nothing_left()

    def test_5xx_past_the_budget_stops_the_child_when_the_budget_ends(self):
        # Defaults: TTL 15s, so the stop begins 15s - 1.5s margin - 5s -kill-after = 8.5s after
        # the last renewal that was answered; the monitor's failing queries stop nothing sooner.
        holder = self.start_lock("-shell=false", self.prefix, "/bin/sh", "-c",
                                 self.child_that_logs_term())
        self.wait_file("pid", "\n")
        session = self.the_new_session()
        start = time.monotonic()
        self.consul.fail_5xx(20)
        failing = time.monotonic()
        self.consul.drop_connections()
        try:
            self.wait_file("term", "\n", timeout=12)
            termed = time.monotonic()
        finally:
            self.consul.heal()
        # The last renewal the agent answered (or the session's creation) arrived before the
        # window began, or while it was being set up; lock sent it a little earlier.
        def last_before(t):
            return max(q["at"] for q in self.consul.requests()
                       if q["path"] in ("/v1/session/create", f"/v1/session/renew/{session}")
                       and q["at"] < t)
        self.assertGreater(termed, last_before(start) + 8.5 - 0.5)
        self.assertLess(termed, last_before(failing) + 8.5 + 1.0 * SLOW)
        code, _, err = self.finish(holder)
        self.assertEqual(code, 1, err)
        self.assertIn("lock lost", err)
        self.assertIn("500 Internal Server Error (No cluster leader)", err)

    def test_retries_start_afresh_after_a_success(self):
        # A TTL of 30 s keeps the renewals (every 10 s) out of the windows below.
        holder = self.start_lock("-monitor-retry", "3", "-session-ttl", "30s", "-shell=false",
                                 self.prefix, "/bin/sh", "-c", self.child_that_logs_term())
        pid = int(self.wait_file("pid", "\n"))
        # Three 1.5 s windows of 500s, each begun by cutting the monitor's blocking query: every
        # window costs the monitor a few failed reads, more than three in all. Failures that a
        # success separates must not add up to a loss.
        for _ in range(3):
            healed = time.monotonic() + 1.5
            self.consul.fail_5xx(1.5)
            self.consul.drop_connections()
            # The passage of time is what is under test: the window runs out.
            time.sleep(1.6)
            # A blocking query (one with an index) that arrived after the window means the read
            # before it succeeded: the monitor is back at work before the next window begins.
            # It may have arrived before this line runs, and then it is still waiting.
            wait_for(lambda: any(q["at"] > healed and re.search(r"(^|&)index=", q["query"])
                                 for q in self.consul.requests()),
                     what="the monitor to wait on the key again after the window")
        self.assertTrue(pid_alive(pid))
        self.assertFalse(os.path.exists(self.path("term")))
        self.release()
        code, _, err = self.finish(holder)
        self.assertEqual(code, 0, err)
        self.assert_nothing_left()

    def test_5xx_child_dead_before_the_session_can_expire_whatever_the_retries(self):
        ttl = 10
        holder = self.start_lock("-session-ttl", f"{ttl}s", "-monitor-retry", "1000",
                                 "-kill-after", "3s", "-shell=false", self.prefix, "/bin/sh",
                                 "-c", f"trap '' TERM; echo $$ > {self.path('pid')}; "
                                 "while :; do sleep 0.01; done")
        pid = int(self.wait_file("pid", "\n"))
        self.child_pids.append(pid)
        failing = time.monotonic()
        self.consul.fail_5xx(60)
        self.consul.drop_connections()
        try:
            # The child ignores SIGTERM, so only the SIGKILL at the lease-safe deadline ends it.
            wait_for(lambda: not pid_alive(pid), ttl + 5, "the child to die")
            dead = time.monotonic()
        finally:
            self.consul.heal()
        # No renewal succeeded once the 500s began, so the session could have expired TTL after
        # that at the earliest.
        self.assertLess(dead, failing + ttl)
        code, _, err = self.finish(holder, timeout=30)
        self.assertEqual(code, 1, err)
        wait_for(lambda: not self.new_sessions(), 15, "the session to be gone")

    def test_partition_child_dead_before_the_session_can_expire(self):
        ttl = 10
        holder = self.start_lock("-session-ttl", f"{ttl}s", "-kill-after", "3s", "-shell=false",
                                 self.prefix, "/bin/sh", "-c",
                                 f"trap '' TERM; echo $$ > {self.path('pid')}; "
                                 "while :; do sleep 0.01; done")
        pid = int(self.wait_file("pid", "\n"))
        self.child_pids.append(pid)
        self.the_new_session()
        partitioned = time.monotonic()
        self.consul.partition(60)
        try:
            # The child ignores SIGTERM, so only the SIGKILL at the lease-safe deadline ends it.
            wait_for(lambda: not pid_alive(pid), ttl + 5, "the child to die")
            dead = time.monotonic()
        finally:
            self.consul.heal()
        # The last renewal that lock saw answered was sent before the partition, so the session
        # could have expired TTL after the partition began at the earliest.
        self.assertLess(dead, partitioned + ttl)
        code, _, err = self.finish(holder, timeout=30)
        self.assertEqual(code, 1, err)
        # The session has expired by now or lock destroyed it once the partition ended.
        wait_for(lambda: not self.new_sessions(), 15, "the session to be gone")


class ConsulRoundTripTest(ConsulTestCase):
    """Requests and connections per acquisition and release, as the double saw them, so that
    they cannot grow unnoticed. The child stays until the session's monitor waits in its blocking
    query, so that every request of a hold is counted. Go's api.Lock and api.Semaphore under
    `consul lock` (consul_peer.py) make as many: they ask the agent for its node name
    (/v1/agent/self) where lock reads the holders again after its acquisition."""

    def round_trips(self, *flags):
        """The requests of one hold as "METHOD path query-names" (sorted), the prefix and our
        session ID left out, and how many connections they came over."""
        self.consul.clear_requests()
        holder = self.hold(*flags, prefix=self.prefix)
        wait_for(lambda: any("index=" in q["query"] for q in self.consul.requests()),
                 what="the monitor's blocking query")
        self.release()
        self.assert_succeeds(holder)
        seen = self.consul.requests()
        self.assertEqual(self.new_sessions(), set())

        def name(q):
            path = re.sub("[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", "<session>", q["path"])
            path = path.replace(f"/{self.prefix}/", "/").replace(f"/{self.prefix}", "/")
            query = "&".join(sorted(k for k, _ in urllib.parse.parse_qsl(q["query"], keep_blank_values=True)))
            return f'{q["method"]} {path} {query}'.rstrip()
        return sorted(map(name, seen)), len({q["connection"] for q in seen})

    def test_lock(self):
        names, connections = self.round_trips()
        self.assertEqual(names, sorted([
            "PUT /v1/session/create",
            "GET /v1/kv/.lock", "PUT /v1/kv/.lock acquire&flags",
            "GET /v1/kv/.lock consistent",  # the holder is really us
            "GET /v1/kv/.lock consistent", "GET /v1/kv/.lock consistent&index&wait",  # the monitor
            "PUT /v1/kv/.lock flags&release", "PUT /v1/session/destroy/<session>",
            "GET /v1/kv/.lock", "DELETE /v1/kv/.lock cas"]))
        self.assertEqual(connections, 4)  # session, acquisition, monitor, release

    def test_semaphore(self):
        names, connections = self.round_trips("-n", "3")
        self.assertEqual(names, sorted([
            "PUT /v1/session/create", "PUT /v1/kv/<session> acquire&flags",
            "GET /v1/kv/ recurse", "PUT /v1/kv/.lock cas&flags",
            "GET /v1/kv/ consistent&recurse",  # our slot is really counted
            "GET /v1/kv/ consistent&recurse", "GET /v1/kv/ consistent&index&recurse&wait",  # the monitor
            "GET /v1/kv/ recurse", "PUT /v1/kv/.lock cas&flags", "DELETE /v1/kv/<session>",
            "GET /v1/kv/ recurse", "DELETE /v1/kv/.lock cas", "PUT /v1/session/destroy/<session>"]))
        self.assertEqual(connections, 4)

ACL = {
    "tokens": {
        "app-secret": {"accessor": "aaaaaaaa-0000-0000-0000-000000000001",
                       "key_prefix": {"app/": "write", "app/ro/": "read"},
                       "session": "write", "agent": "read"},
        "admin-secret": {"key_prefix": {"": "write"}, "session": "write", "agent": "read"},
    },
}


class ConsulAclTest(ConsulTestCase):
    double_options = {"acl": ACL}
    token = "admin-secret"

    def setUp(self):
        super().setUp()
        self.prefix = "app/" + self.prefix

    def test_every_token_source_sends_it_as_a_header_only(self):
        with open(self.path("token"), "w") as f:
            f.write("app-secret\n")
        os.chmod(self.path("token"), 0o600)
        sources = {"-token": (("-token", "app-secret"), {}),
                   "-token-file": (("-token-file", self.path("token")), {}),
                   "CONSUL_HTTP_TOKEN": ((), {"CONSUL_HTTP_TOKEN": "app-secret"}),
                   "CONSUL_HTTP_TOKEN_FILE": ((), {"CONSUL_HTTP_TOKEN_FILE": self.path("token")})}
        for source, (flags, env) in sources.items():
            for n in ("1", "2"):
                with self.subTest(source=source, n=n):
                    self.consul.clear_requests()
                    r = self.run_lock(*flags, "-n", n, self.prefix, "touch " + self.path("ran"),
                                      env=dict(self.env, **env))
                    self.assertEqual((r.returncode, r.stderr), (0, ""))
                    self.assertTrue(os.path.exists(self.path("ran")))
                    os.unlink(self.path("ran"))
                    seen = self.consul.requests()
                    self.assertTrue(any(q["headers"].get("x-consul-token") == "app-secret"
                                        for q in seen))
                    for q in seen:
                        self.assertNotIn("secret", q["path"] + "?" + q["query"])
                        self.assertNotRegex(q["query"], r"(^|&)token=")
                    self.assert_nothing_left()

    def test_token_files_that_are_not_small_regular_files_are_refused_at_once(self):
        os.mkfifo(self.path("fifo"))
        with open(self.path("big"), "w") as f:
            f.write("x" * (64 << 10) + "y")
        os.chmod(self.path("big"), 0o600)
        cases = {self.path("fifo"): "is not a regular file",
                 "/dev/zero": "is not a regular file",
                 self.path(""): "is not a regular file",
                 self.path("big"): "is larger than 64 KiB",
                 self.path("missing"): "cannot read"}
        for path, said in cases.items():
            with self.subTest(path=path):
                self.consul.clear_requests()
                r = self.run_lock("-token-file", path, self.prefix, "touch " + self.path("ran"),
                                  timeout=5)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertRegex(r.stderr, r"^lock: [^\n]*" + re.escape(said) + r"[^\n]*\n$")
                self.assertFalse(os.path.exists(self.path("ran")))
                self.assertEqual(self.consul.request_count(), 0)

    def test_a_token_file_others_can_read_is_used_with_a_warning(self):
        # As ssh warns of a private key others can read; an error would break consul lock's users.
        token = self.path("token")
        with open(token, "w") as f:
            f.write("app-secret\n")
        for mode in (0o644, 0o640, 0o604):
            with self.subTest(mode=oct(mode)):
                os.chmod(token, mode)
                self.consul.clear_requests()
                r = self.run_lock("-token-file", token, self.prefix, "touch " + self.path("ran"))
                self.assertEqual((r.returncode, r.stderr),
                                 (0, f"lock: the token file {token} can be read by others "
                                     f"(mode {mode:04o}); chmod go-r it\n"))
                self.assertTrue(any(q["headers"].get("x-consul-token") == "app-secret"
                                    for q in self.consul.requests()))
                os.unlink(self.path("ran"))

    def test_key_without_write_permission_is_a_clear_error(self):
        prefix = "app/ro/" + self.prefix.rsplit("/", 1)[1]
        for n, key in (("1", re.escape(prefix + "/.lock")), ("2", re.escape(prefix + "/"))):
            with self.subTest(n=n):
                r = self.run_lock("-token", "app-secret", "-n", n, prefix,
                                  "touch " + self.path("ran"))
                self.assertEqual(r.returncode, 1)
                self.assertRegex(r.stderr, "(?i)permission denied")
                self.assertRegex(r.stderr, key)
                self.assertFalse(os.path.exists(self.path("ran")))
                self.assert_nothing_left(prefix)


class ConsulTransportTest(ConsulTestCase):
    double_options = {"unix": True, "client_certs": True}

    def run_and_check(self, *flags, env=None, listener):
        self.consul.clear_requests()
        r = self.run_lock(*flags, self.prefix, f'echo "$CONSUL_LOCK_HELD" > {self.path("held")}',
                          env=env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(read_file(self.path("held")), "true\n")
        os.unlink(self.path("held"))
        self.assertEqual({q["listener"] for q in self.consul.requests()}, {listener})
        self.assert_nothing_left()

    def refused(self, *flags, env=None):
        r = self.run_lock(*flags, self.prefix, "touch " + self.path("ran"), env=env)
        self.assertEqual(r.returncode, 1)
        self.assertNotEqual(r.stderr, "")
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_nothing_left()

    def client_cert_flags(self):
        return ("-client-cert", self.consul.pki["client_cert"],
                "-client-key", self.consul.pki["client_key"])

    def test_https_with_a_test_ca_and_a_client_certificate(self):
        self.run_and_check("-http-addr", "https://" + self.consul.https_addr,
                           "-ca-file", self.consul.pki["ca"], *self.client_cert_flags(),
                           listener="https")

    def test_https_refused_without_client_certificate_or_trusted_ca(self):
        https = "https://" + self.consul.https_addr
        self.refused("-http-addr", https, "-ca-file", self.consul.pki["ca"])
        self.refused("-http-addr", https, *self.client_cert_flags())

    def test_ca_directory_and_server_name(self):
        capath = self.path("cas")
        os.mkdir(capath)
        subject_hash = subprocess.run(["openssl", "x509", "-hash", "-noout", "-in",
                                       self.consul.pki["ca"]], check=True, capture_output=True,
                                      text=True).stdout.strip()
        os.symlink(self.consul.pki["ca"], os.path.join(capath, subject_hash + ".0"))
        https = "https://" + self.consul.https_addr
        self.run_and_check("-http-addr", https, "-ca-path", capath, *self.client_cert_flags(),
                           "-tls-server-name", "server.dc1.consul", listener="https")
        self.refused("-http-addr", https, "-ca-path", capath, *self.client_cert_flags(),
                     "-tls-server-name", "elsewhere.dc1.consul")

    def test_https_from_the_environment(self):
        env = dict(self.env, CONSUL_HTTP_ADDR=self.consul.https_addr, CONSUL_HTTP_SSL="true",
                   CONSUL_CACERT=self.consul.pki["ca"],
                   CONSUL_CLIENT_CERT=self.consul.pki["client_cert"],
                   CONSUL_CLIENT_KEY=self.consul.pki["client_key"])
        self.run_and_check(env=env, listener="https")
        env = dict(env, CONSUL_HTTP_SSL_VERIFY="false")
        del env["CONSUL_CACERT"]
        self.run_and_check(env=env, listener="https")

    def test_unix_socket(self):
        self.run_and_check("-http-addr", "unix://" + self.consul.unix_path, listener="unix")


class ConsulStatusWatchTest(StatusWatch, ConsulTestCase):
    """-status -watch: blocking queries on the prefix, each from the index the last answered."""

    BUDGET = (("-session-ttl", "10s", "-kill-after", "5s"), 4.0)  # Consul's TTLs start at 10 s
    RENEW = 5.0  # with its default TTL of 15 s

    @contextlib.contextmanager
    def proxy(self):
        log = HttpRequestLog()
        host, port = self.consul.http_addr.rsplit(":", 1)
        with FaultProxy(host, int(port), on_upstream=log) as proxy:
            yield proxy, lambda: [r for _, r in log.requests()], ["-http-addr", proxy.address]


class ConsulOperatorsTest(OperatorFlags, ConsulTestCase):
    BACKEND = "consul"

    def lose(self):
        self.consul.session_destroy(self.the_new_session())


class ConsulHealthChecksTest(HealthChecks, ConsulTestCase):
    BACKEND = "consul"

    def test_session_checks_let_consul_take_the_lock_away_itself(self):
        """-session-checks: the session is tied to the agent's checks, serfHealth and the
        service's; when the service's goes critical, Consul invalidates the session, the holder
        loses the lock and the next in line takes it."""
        self.consul.set_check("service:web", "passing")
        holder = self.serve("-session-checks", "serfHealth, service:web")
        session = self.consul.session_info(self.the_new_session())
        self.assertEqual((session["Checks"], session["NodeChecks"]), (["serfHealth", "service:web"],) * 2)
        waiter = self.start_lock(self.prefix, "touch " + self.path("second"))
        self.consul.set_check("service:web", "critical")
        code, _, err = self.finish(holder)
        self.assertEqual(code, 9, err)
        self.assertIn("lock: lock lost: ", err)
        self.assert_succeeds(waiter)
        self.assertTrue(os.path.exists(self.path("second")))
        self.consul.set_check("service:web", "passing")

    def test_a_session_check_that_is_missing_refuses_the_run_and_empty_means_none(self):
        r = self.run_lock("-session-checks", "service:db", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("Missing check 'service:db' registration", r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))
        holder = self.serve("-session-checks=")
        self.assertEqual(self.consul.session_info(self.the_new_session())["NodeChecks"], [])
        holder.terminate()
        self.assertEqual(self.finish(holder)[0], 0)


if __name__ == "__main__":
    unittest.main()
