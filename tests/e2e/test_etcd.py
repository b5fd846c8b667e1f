"""The etcd backend against a real etcd: etcd's own mutex layout shared with `etcdctl lock`, the
semaphore, loss of the lease, the lease-safe deadline, and nothing left behind."""

import concurrent.futures
import contextlib
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from etcd_server import EtcdServer, EtcdTestCase, b64, grpc_calls
from fault_proxy import FaultProxy, HttpRequestLog
from harness import (LOCK, SLOW, Fleet, LimitConflicts, OperatorFlags, StatusWatch, ThreeSlots, Watch, assert_coalesced, max_overlap,
                     most_states, pid_alive, read_file, wait_for)
from notify_socket import NotifiesWhileWaiting
from health_checks import HealthChecks
from nested_runs import NestedRuns

# One write(2) per line on an O_APPEND descriptor, so concurrent lines never interleave.
LOGGED = 'echo "enter $ID" >> "$LOG"; echo "exit $ID" >> "$LOG"'


class EtcdLockTest(EtcdTestCase):
    def test_child_gets_the_key_and_its_create_revision(self):
        r = self.run_lock(self.prefix, 'echo "$LOCK_KEY $LOCK_FENCING_TOKEN $CONSUL_LOCK_HELD" > '
                          + self.path("env") + '; sleep 0.1')
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        key, token, held = read_file(self.path("env")).split()
        self.assertRegex(key, "^" + self.prefix + "/[0-9a-f]+$")
        self.assertEqual(held, "true")
        self.assertGreater(int(token), 0)
        self.assert_nothing_left()

    def test_child_inherits_no_descriptor_of_ours_but_the_callers(self):
        with open(self.path("passed"), "w") as passed:
            fd = passed.fileno()
            r = subprocess.run([LOCK, self.prefix, "ls /proc/$$/fd"], env=self.env, text=True,
                               capture_output=True, pass_fds=(fd,), timeout=30 * SLOW)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(map(int, r.stdout.split())), [0, 1, 2, fd])

    def test_key_layout_is_etcds_mutex_with_a_holder_record(self):
        holder = self.hold(prefix=self.prefix)
        (key, (value, _, lease)), = self.etcd.keys(self.prefix + "/").items()
        self.assertEqual(key, f"{self.prefix}/{lease:x}")  # as etcd's concurrency.Mutex names it
        self.assertIn(f'"pid":{holder.pid}', value)
        self.assertEqual(set(self.etcd.leases()) - self.leases_before, {lease})
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()

    def test_value_flag_is_stored_as_given(self):
        holder = self.hold("-value", "leader=web1", prefix=self.prefix)
        (value, _, _), = self.etcd.keys(self.prefix + "/").values()
        self.assertEqual(value, "leader=web1")
        self.release()
        self.assert_succeeds(holder)

    def test_lock_waits_behind_etcdctl_lock_and_vice_versa(self):
        started = self.path("etcdctl-holds")
        etcdctl = self.start_etcdctl("lock", self.prefix, "--", "sh", "-c",
                                     f"touch {started}; while [ ! -e {self.path('go')} ]; do sleep 0.01; done")
        wait_for(lambda: os.path.exists(started), what="etcdctl lock to hold")
        waiter = self.start_lock(self.prefix, "touch " + self.path("lock-held"))
        wait_for(lambda: len(self.etcd.keys(self.prefix + "/")) == 2, what="lock to queue")
        self.assertFalse(os.path.exists(self.path("lock-held")))
        self.release("go")
        self.assert_succeeds(waiter)
        self.assertEqual(etcdctl.communicate(timeout=10 * SLOW)[1], "")
        self.assertEqual(etcdctl.returncode, 0)

        holder = self.hold(prefix=self.prefix, gate="release-lock")
        etcdctl = self.start_etcdctl("lock", self.prefix, "--", "touch", self.path("etcdctl-held"))
        wait_for(lambda: len(self.etcd.keys(self.prefix + "/")) == 2, what="etcdctl to queue")
        self.assertFalse(os.path.exists(self.path("etcdctl-held")))
        self.release("release-lock")
        self.assert_succeeds(holder)
        self.assertEqual(etcdctl.communicate(timeout=10 * SLOW)[1], "")
        self.assertEqual(etcdctl.returncode, 0)
        self.assertTrue(os.path.exists(self.path("etcdctl-held")))

    def test_lock_and_etcdctl_lock_alternate_without_overlap(self):
        contenders, rounds = 8, 25
        log = self.path("log")
        lock_loop = f'i=0; while [ $i -lt {rounds} ]; do "$LOCK" "$P" "$CHILD" || exit $?; i=$((i+1)); done'
        etcdctl_loop = (f'i=0; while [ $i -lt {rounds} ]; do "$ETCDCTL" lock "$P" -- sh -c "$CHILD" '
                        '>/dev/null || exit $?; i=$((i+1)); done')
        procs = []
        for n in range(contenders):
            env = dict(self.env, LOCK=LOCK, ETCDCTL=self.etcd.etcdctl()[0], P=self.prefix,
                       CHILD=LOGGED, LOG=log, ID=str(n))
            p = subprocess.Popen(["/bin/sh", "-c", lock_loop if n % 2 else etcdctl_loop], env=env,
                                 stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            self.procs.append(p)
            procs.append(p)
        for n, p in enumerate(procs):
            _, err = p.communicate(timeout=240 * SLOW)
            self.assertEqual(p.returncode, 0, f"contender {n} failed: {err}")
        self.assertEqual(len(read_file(log).splitlines()), 2 * contenders * rounds)
        self.assertEqual(max_overlap(log), 1)
        wait_for(lambda: not self.etcd.keys(self.prefix + "/"), what="no key to be left")

    def test_timeout_leaves_no_key_and_no_lease(self):
        holder = self.hold(prefix=self.prefix)
        leases = set(self.etcd.leases())
        start = time.monotonic()
        r = self.run_lock("-timeout", "300ms", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"timed out waiting for prefix '{self.prefix}'", r.stderr)
        self.assertGreaterEqual(time.monotonic() - start, 0.3)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assertEqual(set(self.etcd.leases()) - leases, set())
        self.assertEqual(len(self.etcd.keys(self.prefix + "/")), 1)
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()

    def test_a_dead_endpoint_is_skipped(self):
        r = self.run_lock("-endpoints", "http://127.0.0.1:1," + self.etcd.url, self.prefix, "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_unreachable_etcd_is_an_error_naming_it(self):
        r = self.run_lock("-endpoints", "http://127.0.0.1:1", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"^lock: etcd at http://127\.0\.0\.1:1: lease grant: cannot reach it \(.+\)\n$")
        self.assertFalse(os.path.exists(self.path("ran")))

    def test_status_names_the_holder_and_the_waiter(self):
        holder = self.hold(prefix=self.prefix)
        waiter = self.start_lock(self.prefix, "true")
        wait_for(lambda: len(self.etcd.keys(self.prefix + "/")) == 2, what="the waiter to queue")
        r = self.run_lock("-status", self.prefix)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"holder: pid {holder.pid}", r.stdout)
        self.assertIn(f"waiting: pid {waiter.pid}", r.stdout)
        self.release()
        self.assert_succeeds(holder)
        self.assert_succeeds(waiter)
        self.assertEqual(self.run_lock("-status", self.prefix).returncode, 3)


class EtcdSemaphoreTest(ThreeSlots, LimitConflicts, EtcdTestCase):
    """The semaphore's shared tests (ThreeSlots, LimitConflicts) on etcd."""


class EtcdNotifyTest(NotifiesWhileWaiting, EtcdTestCase):
    """systemd's notifications while waiting on etcd (the tests are NotifiesWhileWaiting's)."""

    def holder_records(self):
        return [json.loads(value) for value, _, _ in self.etcd.keys(self.prefix + "/").values()]

    def test_notify_the_waiting_status_follows_the_queue(self):
        # etcd serves in order of creation: a second lock queued ahead of the notified one holds
        # next, while that one still waits, and the refresh 2 s later names the new holder.
        first = self.hold(prefix=self.prefix, gate="go0")
        second = self.start_lock(self.prefix, f"touch {self.path('second.held')}; "
                                 f"while [ ! -e {self.path('go1')} ]; do sleep 0.01; done")
        wait_for(lambda: len(self.etcd.keys(self.prefix + "/")) == 2, what="the second to queue")
        w = self.start_notified_waiter(1)
        behind_first = self.wait_status(w, self.behind(1, [first]), self.FIRST_LOOK, w.started)
        self.release("go0")
        self.assert_succeeds(first)
        wait_for(lambda: os.path.exists(self.path("second.held")) or second.poll() is not None,
                 what="the second lock's child to start")
        changed = time.monotonic()
        behind_second = self.wait_status(w, self.behind(1, [second]), self.REFRESH, changed,
                                         after=behind_first.seq)
        self.release("go1")
        self.assert_succeeds(second)
        texts = self.finish_notified_waiter(w, behind_second.seq)
        self.assertEqual(texts[:3], [w.first.get("STATUS"), behind_first.get("STATUS"),
                                     behind_second.get("STATUS")])
        self.assert_nothing_left()


class EtcdLossTest(EtcdTestCase):
    def child_that_logs_term(self):
        return (f'trap \'date +%s.%N > {self.path("term")}; exit 0\' TERM; '
                f'echo $$ > {self.path("pid")}; while :; do sleep 0.01; done')

    def test_revoked_lease_stops_the_child_at_once(self):
        """At once, not at the TTL's end: within 250 ms, the child's shell and its date(1)
        counted, on a loaded machine."""
        holder = self.start_lock("-shell=false", self.prefix, "/bin/sh", "-c", self.child_that_logs_term())
        self.wait_file("pid")
        (_, (_, _, lease)), = self.etcd.keys(self.prefix + "/").items()
        self.etcd.revoke(lease)
        revoked = time.time()
        self.wait_file("term", "\n")
        self.assertLess(float(read_file(self.path("term"))) - revoked, 0.25 * SLOW)
        code, _, err = self.finish(holder)
        self.assertEqual(code, 1)

    def test_key_deleted_before_the_holds_watch_begins_is_heard_as_it_begins(self):
        """The hold's watch on its own key begins 100 ms into the hold, from the hold's revision:
        a deletion before then is heard as it begins, not at the next renewal (500 ms)."""
        holder = self.start_lock("-shell=false", self.prefix, "/bin/sh", "-c", self.child_that_logs_term())
        self.wait_file("pid")
        (key, _), = self.etcd.keys(self.prefix + "/").items()
        self.etcd.call("/v3/kv/deleterange", {"key": b64(key.encode())})
        deleted = time.time()
        self.wait_file("term", "\n")
        self.assertLess(float(read_file(self.path("term"))) - deleted, (0.1 + 0.25) * SLOW)
        code, _, err = self.finish(holder)
        self.assertEqual(code, 1)
        self.assertIn(f"our key {key} was deleted", err)
        self.assert_nothing_left()
        self.assertIn("lock lost: our key", err)
        self.assert_nothing_left()

    def test_paused_server_child_dead_before_the_lease_can_expire(self):
        ttl = 2
        holder = self.start_lock("-session-ttl", f"{ttl}s", "-kill-after", "1s", "-shell=false",
                                 self.prefix, "/bin/sh", "-c",
                                 f"trap '' TERM; echo $$ > {self.path('pid')}; while :; do sleep 0.01; done")
        pid = int(self.wait_file("pid", "\n"))
        paused = time.monotonic()
        self.etcd.pause()
        try:
            # The child ignores SIGTERM, so only the SIGKILL at the lease-safe deadline ends it.
            wait_for(lambda: not pid_alive(pid), ttl + 2, "the child to die")
            dead = time.monotonic()
        finally:
            self.etcd.resume()
        # Our last acknowledged keepalive was sent before the pause, so the lease could have
        # expired TTL after the pause at the earliest.
        self.assertLess(dead, paused + ttl)
        code, _, err = self.finish(holder)
        self.assertEqual(code, 1)
        self.assertIn("the lease could not be renewed", err)
        # Nobody could take the lock while the child ran: etcd gives it out only now.
        r = subprocess.run(self.etcd.etcdctl("lock", self.prefix, "--", "true"), env=self.env,
                           timeout=30, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(time.monotonic(), dead)


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "consul_double"))
from fixture import make_test_pki  # noqa: E402


class EtcdRoundTripTest(EtcdTestCase):
    """Requests and connections per acquisition and release, counted by a proxy in front of etcd,
    so that they cannot grow unnoticed. The child stays until the hold watches its own key, so
    that every request of a hold is counted; the lease's renewals, which depend on time alone,
    are not."""

    def round_trips(self, *flags):
        log = HttpRequestLog()
        host, port = self.etcd.url.split("//")[1].rsplit(":", 1)
        with FaultProxy(host, int(port), on_upstream=log) as proxy:
            holder = self.hold("-endpoints", proxy.url, *flags, prefix=self.prefix)
            wait_for(lambda: ("POST /v3/watch" in (r for _, r in log.requests())),
                     what="the hold's watch on its key")
            self.release()
            self.assert_succeeds(holder)
        self.assert_nothing_left()
        seen = [(c, r) for c, r in log.requests() if r != "POST /v3/lease/keepalive"]
        return sorted(r for _, r in seen), len({c for c, _ in seen})

    def test_lock(self):
        requests, connections = self.round_trips()
        self.assertEqual(requests, sorted([
            "POST /v3/lease/grant",
            "POST /v3/kv/txn",  # queues, and reads the queue: are we first?
            "POST /v3/watch",  # the hold's watch on its key, from that read on
            "POST /v3/lease/revoke"]))
        self.assertEqual(connections, 2)  # the run's, and the watch's

    def test_semaphore(self):
        requests, connections = self.round_trips("-n", "3")
        self.assertEqual(requests, sorted([
            "POST /v3/lease/grant", "POST /v3/kv/txn",
            "POST /v3/kv/put",  # tells the waiter behind us that we hold
            "POST /v3/watch", "POST /v3/lease/revoke"]))
        self.assertEqual(connections, 2)

class EtcdTlsTest(EtcdTestCase):
    """etcd that requires TLS with client certificates from a CA made here."""

    @classmethod
    def setUpClass(cls):
        cls.pki_dir = tempfile.mkdtemp(prefix="lock-etcd-pki-")
        cls.pki = make_test_pki(cls.pki_dir, server_usage="serverAuth,clientAuth")
        cls.etcd = EtcdServer(cls.pki).__enter__()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.pki_dir, ignore_errors=True)

    def tls_flags(self):
        return ["-ca-file", self.pki["ca"], "-client-cert", self.pki["client_cert"],
                "-client-key", self.pki["client_key"]]

    def test_flags_or_etcdctls_variables(self):
        r = self.run_lock(*self.tls_flags(), self.prefix, "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        env = dict(self.env, ETCDCTL_CACERT=self.pki["ca"], ETCDCTL_CERT=self.pki["client_cert"],
                   ETCDCTL_KEY=self.pki["client_key"])
        r = self.run_lock(self.prefix, "true", env=env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assert_nothing_left()

    def test_no_client_certificate_is_refused(self):
        r = self.run_lock("-ca-file", self.pki["ca"], self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"etcd at {self.etcd.url}: lease grant: cannot reach it", r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))

    def test_server_name_is_checked_against_the_certificate(self):
        r = self.run_lock(*self.tls_flags(), "-tls-server-name", "server.dc1.consul", self.prefix, "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        r = self.run_lock(*self.tls_flags(), "-tls-server-name", "elsewhere.example", self.prefix,
                          "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertFalse(os.path.exists(self.path("ran")))


class EtcdAuthTest(EtcdTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for path, body in (("/v3/auth/role/add", {"name": "root"}),
                           ("/v3/auth/user/add", {"name": "root", "password": "s3cret"}),
                           ("/v3/auth/user/grant", {"user": "root", "role": "root"}),
                           ("/v3/auth/enable", {})):
            cls.etcd.call(path, body)
        cls.etcd.token = cls.etcd.call("/v3/auth/authenticate",
                                       {"name": "root", "password": "s3cret"})["token"]

    def test_user_and_password_from_etcdctl_user(self):
        r = self.run_lock(self.prefix, 'echo "$LOCK_KEY" > ' + self.path("key"),
                          env=dict(self.env, ETCDCTL_USER="root:s3cret"))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertTrue(read_file(self.path("key")).startswith(self.prefix + "/"))

    def test_wrong_password_is_an_error(self):
        r = self.run_lock(self.prefix, "touch " + self.path("ran"),
                          env=dict(self.env, ETCDCTL_USER="root", ETCDCTL_PASSWORD="wrong"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("refused user 'root'", r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))


class EtcdFleetTest(Fleet, EtcdTestCase):
    """A fleet's cron job: N contenders queued on one prefix at once. What each costs etcd stays
    what one waiter costs, however long the line (counted by etcd itself; the lease's renewals,
    which depend on time alone, are not)."""

    def test_requests_per_contender_do_not_grow_with_the_line(self):
        before = grpc_calls(self.etcd.url)
        holder = self.hold(prefix=self.prefix)
        procs = [self.start_lock(self.prefix, "true") for _ in range(self.N)]
        looks = 0  # the test's own reads, taken off below

        def queued():
            nonlocal looks
            looks += 1
            return len(self.etcd.keys(self.prefix + "/")) == self.N + 1
        wait_for(queued, 30 * SLOW, "every contender to queue")
        # A waiter renews its lease at TTL/2, a holder every 500 ms (lease_budget.hpp): in 2 s of
        # the line waiting, each waiter renews once at most, and the holder 4 times.
        renewals = grpc_calls(self.etcd.url)["LeaseKeepAlive"]
        time.sleep(2)
        self.assertLessEqual(grpc_calls(self.etcd.url)["LeaseKeepAlive"] - renewals, self.N + 5)
        self.release()
        self.assert_succeeds(holder)
        for p in procs:
            self.assert_succeeds(p)
        calls = grpc_calls(self.etcd.url) - before
        calls["Range"] -= looks
        del calls["LeaseKeepAlive"]
        # Each waiter: a lease, the queueing transaction, a watch on the key ahead, one read once
        # it is gone, the revoke: 5 (its child, `true`, is gone before the hold's watch on its own
        # key would begin, 100 ms in). The first holder: 4, that watch included. And the one next
        # in line may read again and watch anew, up to 3 times, when its watch was made behind
        # etcd (etcd_recipe.cpp): a constant, not one per waiter.
        n = self.N + 1
        self.assertEqual((calls["LeaseGrant"], calls["Txn"], calls["LeaseRevoke"]), (n, n, n), dict(calls))
        self.assertLessEqual(sum(calls.values()), 5 * n + 2 * 3, dict(calls))


class EtcdLongerPrefixTest(EtcdTestCase):
    def test_keys_of_a_longer_prefix_between_holder_and_waiter_hide_no_holder(self):
        """A contender reads only the few keys just ahead of it; keys of a longer prefix
        ("<prefix>/x/...") that fill that window must not make it miss the holder behind them."""
        holder = self.hold(prefix=self.prefix)
        for k in range(4):
            self.etcd.call("/v3/kv/put", {"key": b64(f"{self.prefix}/x/{k}".encode()), "value": b64(b"other")})
        r = self.run_lock("-timeout", "500ms", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))
        r = self.run_lock("-n", "2", "-timeout", "500ms", self.prefix, "true")
        self.assertIn("Existing key does not match semaphore use", r.stderr)
        self.release()
        self.assert_succeeds(holder)
        self.etcd.call("/v3/kv/deleterange", {"key": b64(f"{self.prefix}/x/".encode()), "range_end": b64(f"{self.prefix}/x0".encode())})
        self.assert_nothing_left()


class EtcdStatusWatchTest(StatusWatch, EtcdTestCase):
    """-status -watch: one read, then one watch on the prefix from the revision after it."""

    @contextlib.contextmanager
    def proxy(self):
        log = HttpRequestLog()
        host, port = self.etcd.url.split("//")[1].rsplit(":", 1)
        with FaultProxy(host, int(port), on_upstream=log) as proxy:
            yield proxy, lambda: [r for _, r in log.requests()], ["-endpoints", proxy.url]

    def test_changes_made_during_a_cut_are_replayed_in_order(self):
        """A holder that comes and goes while the watch's connection is cut, and one that stays:
        once back, the watch resumes from the revision it last applied, and what it prints of the
        changes replayed is in their order (a burst may print as fewer states), ending with the
        state they settled in."""
        with self.proxy() as (proxy, _, via):
            watch = Watch(self, "-json", *via, self.prefix)
            watch.until(lambda o: not o["held"], "the first status")
            proxy.set_mode("reset")
            self.assertEqual(self.run_lock("-name", "brief", self.prefix, "true").returncode, 0)
            holder = self.hold("-name", "after", prefix=self.prefix)
            proxy.set_mode("pass")
            names = [[h["name"] for h in o["holders"]]
                     for o in watch.states_until(lambda o: o["held"] and o["holders"][0]["name"] == "after",
                                                 "the next holder")]
            replayed = iter([["brief"], [], ["after"]])
            self.assertTrue(all(n in replayed for n in names), names)
            self.release()
            self.assert_succeeds(holder)
            watch.until(lambda o: o["limit"] == 0, "the holder gone")
            self.assertEqual(watch.stop(), (0, "", ""))

    def test_a_burst_of_changes_prints_as_a_few_states_ending_with_the_settled_one(self):
        """1,000 keys written under the prefix, each in a request and a revision of its own that
        the watch hears in turn: it prints a few states, the last of them the one the burst
        settled in. A change after that is printed at once."""
        burst = 1000
        watch = Watch(self, "-json", self.prefix)
        watch.until(lambda o: not o["held"], "the first status")
        started = time.monotonic()
        self.put_each([f"{self.prefix}/k{n:04}" for n in range(burst)])
        states = watch.states_until(lambda o: len(o["holders"]) + len(o["waiters"]) == burst,
                                    "the settled state", most=most_states(burst))
        assert_coalesced(self, states, time.monotonic() - started)
        changed = time.monotonic()
        self.etcd.call("/v3/kv/deleterange", {"key": b64(f"{self.prefix}/".encode()),
                                              "range_end": b64(f"{self.prefix}0".encode())})
        self.assertEqual(json.loads(watch.next())["held"], False)  # the next line: nothing in between
        self.assertLess(time.monotonic() - changed, 1.0 * SLOW)
        self.assertEqual(watch.stop(), (0, "", ""))

    def put_each(self, keys, connections=8):
        """Writes each key (empty), one request and one revision each, over a few connections
        at once (etcd commits requests that come together at once)."""
        host, port = self.etcd.url.split("//")[1].rsplit(":", 1)

        def put(share):
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            try:
                for key in share:
                    conn.request("POST", "/v3/kv/put", json.dumps({"key": b64(key.encode())}))
                    reply = conn.getresponse()
                    if reply.status != 200:
                        return f"{key}: {reply.status} {reply.read()!r}"
                    reply.read()
            finally:
                conn.close()
        with concurrent.futures.ThreadPoolExecutor(connections) as pool:
            failed = [f for f in pool.map(put, [keys[k::connections] for k in range(connections)]) if f]
        self.assertEqual(failed, [])


class EtcdOperatorsTest(OperatorFlags, EtcdTestCase):
    BACKEND = "etcd"

    def lose(self):
        (_, (_, _, lease)), = self.etcd.keys(self.prefix + "/").items()
        self.etcd.revoke(lease)

    def lock_env(self, *command):
        """The ETCD_LOCK_* and LOCK_* variables `command` gave its child, as {name: value}."""
        out = self.path("env")
        r = subprocess.run([*command, "/bin/sh", "-c", f"env > {out}"], env=self.env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30 * SLOW)
        self.assertEqual(r.returncode, 0, r.stderr)
        return self.lock_vars(out)

    @staticmethod
    def lock_vars(path):
        """The ETCD_LOCK_* and LOCK_* variables of an env(1) listing."""
        return dict(line.split("=", 1) for line in read_file(path).splitlines()
                    if line.startswith(("ETCD_LOCK_", "LOCK_")))

    def test_the_child_gets_etcdctl_locks_variables(self):
        # Uncontended, the lock's reply is the transaction that made the key: its header's
        # revision is the key's create revision, for etcdctl lock as for lock.
        theirs = self.lock_env(*self.etcd.etcdctl("lock", self.prefix + "-etcdctl"), "--")
        self.assertTrue(theirs["ETCD_LOCK_KEY"].startswith(self.prefix + "-etcdctl/"), theirs)
        ours = self.lock_env(LOCK, "-shell=false", self.prefix)
        self.assertEqual(ours["ETCD_LOCK_KEY"], ours["LOCK_KEY"])
        self.assertEqual(ours["ETCD_LOCK_REV"], ours["LOCK_FENCING_TOKEN"])
        # Behind a holder, the reply that shows the lock held comes after the holder's key went.
        holder = self.hold(prefix=self.prefix)
        waiter = self.start_lock("-shell=false", self.prefix, "/bin/sh", "-c", f"env > {self.path('env')}")
        wait_for(lambda: len(self.etcd.keys(self.prefix + "/")) == 2, what="the waiter to queue")
        self.release()
        self.assert_succeeds(holder)
        self.assert_succeeds(waiter)
        env = self.lock_vars(self.path("env"))
        self.assertEqual(env["ETCD_LOCK_KEY"], env["LOCK_KEY"])
        self.assertGreater(int(env["ETCD_LOCK_REV"]), int(env["LOCK_FENCING_TOKEN"]))


class EtcdHealthChecksTest(HealthChecks, EtcdTestCase):
    BACKEND = "etcd"


class EtcdNestedRunsTest(NestedRuns, EtcdTestCase):
    pass


if __name__ == "__main__":
    unittest.main()
