"""The Consul backend under brief faults and bad replies, against the Consul double: no false loss
with short TTLs, 2.5 s outages ridden out whatever the phase of the hold, blocking queries that
do not block paced instead of spun, endless replies cut off with bounded memory, malformed
replies refused before anything starts (a session ID is a UUID or nothing), check-and-set
answers read back, messages with the agent, the operation and the HTTP status, Retry-After
honoured within -timeout, and a bounded exit when the agent hangs at release, with nothing left
behind when it only fails for a while."""

import json
import os
import signal
import subprocess
import time
import unittest

from harness import SLOW, peak_rss, read_file, wait_for
from notify_socket import StatusLookupCutShort
from test_consul import LOCK_FLAGS, ConsulTestCase

MB = 1 << 20
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User and system time a process (all its threads) has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def let_pass(seconds):
    """Lets time pass where the passage of time is itself the fault under test."""
    time.sleep(seconds)


class ConsulFaultCase(ConsulTestCase):
    def setUp(self):
        super().setUp()
        self.paused = False

    def tearDown(self):
        self.resume_agent()
        self.consul.heal()
        super().tearDown()

    def pause_agent(self):
        os.kill(self.consul.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume_agent(self):
        if self.paused:
            os.kill(self.consul.proc.pid, signal.SIGCONT)
            self.paused = False

    def requests_since(self, since, path_start=""):
        return [q for q in self.consul.requests() if q["at"] >= since and
                q["path"].startswith(path_start)]

    def holder_child(self, name):
        """What a holder's child does first: note a SIGTERM in the file `term.<name>`."""
        return f"trap 'touch {self.path('term.' + name)}; exit 0' TERM; "

    def assert_one_line(self, err):
        self.assertEqual(err.count("\n"), 1, err)
        for internal in ("json.exception", "stoll", "stoull", "what()", "std::"):
            self.assertNotIn(internal, err)

    def session_of(self, prefix):
        """The session that holds the lock on prefix."""
        return self.entry(f"{prefix}/.lock")["Session"]


class NoFalseLossTest(ConsulFaultCase):
    def test_short_ttls_hold_without_a_fault_for_as_long_as_the_child_runs(self):
        # -session-ttl under 12.5s with the default -kill-after of 5s used to put the stop
        # before the first renewal; a long -kill-after leaves even less of Consul's shortest
        # TTL. Each hold runs past several of its renewals.
        combos = [("-session-ttl", "10s"), ("-session-ttl", "12s"),
                  ("-session-ttl", "10s", "-kill-after", "8s"),
                  ("-n", "2", "-session-ttl", "10s", "-kill-after", "7s")]
        holders = []
        for k, flags in enumerate(combos):
            prefix = f"{self.prefix}/h{k}"
            holders.append(self.hold(*flags, prefix=prefix, gate=f"gate{k}",
                                     before=self.holder_child(str(k))))
        sessions = self.wait_new_sessions(len(combos))
        start = time.monotonic()
        let_pass(12)  # the hold's length is what is under test: a whole 12s TTL and more
        for k, holder in enumerate(holders):
            self.assertIsNone(holder.poll(), f"holder {k} ended: {combos[k]}")
            self.assertFalse(os.path.exists(self.path(f"term.{k}")), f"holder {k} was stopped")
        renewals = {s: len(self.requests_since(start, f"/v1/session/renew/{s}")) for s in sessions}
        self.assertTrue(all(n >= 2 for n in renewals.values()), renewals)
        for k, holder in enumerate(holders):
            self.release(f"gate{k}")
            code, _, err = self.finish(holder)
            self.assertEqual((code, err), (0, ""), combos[k])
        self.assert_nothing_left()


class OutageTest(ConsulFaultCase):
    """One 2.5 s outage of each kind, met by six holders (locks and semaphores) whose renewals
    are spread over the 5 s between renewals, so each outage catches each holder at another
    phase: just after a renewal, in the middle, and just before one falls due."""

    HOLDERS = 6

    def five_xx(self):
        self.consul.fail_5xx(2.5)
        self.consul.drop_connections()  # the monitors' waiting queries end and ask again
        return lambda: None

    def closed_connections(self):
        self.consul.reply_fault("/", prefix=True, times=None, seconds=2.5, mode="hang",
                                hang_seconds=0)
        self.consul.drop_connections()
        return lambda: None

    def hung_requests(self):
        self.consul.partition(2.5)
        return lambda: None

    def paused_agent(self):
        self.pause_agent()
        return self.resume_agent

    def test_2_5s_outages_at_any_phase_of_a_hold_stop_no_child(self):
        holders = []
        for k in range(self.HOLDERS):
            n = "1" if k % 2 == 0 else "2"
            holders.append(self.hold("-n", n, prefix=f"{self.prefix}/h{k}", gate=f"gate{k}",
                                     before=self.holder_child(str(k))))
            let_pass(5 / self.HOLDERS)  # spreads the holders' renewals over their period
        sessions = self.wait_new_sessions(self.HOLDERS)
        for kind in self.outages():
            with self.subTest(kind=kind.__name__):
                self.outage(kind, sessions)
                for k, holder in enumerate(holders):
                    self.assertIsNone(holder.poll(), f"holder {k} ended")
                    self.assertFalse(os.path.exists(self.path(f"term.{k}")),
                                     f"holder {k} was stopped")
        for k, holder in enumerate(holders):
            self.release(f"gate{k}")
            code, _, err = self.finish(holder)
            self.assertEqual((code, err), (0, ""), f"holder {k}")
        self.assert_nothing_left()

    def test_2_5s_outages_while_waiting_end_no_wait(self):
        # A waiter's session outlives a 2.5 s outage as a holder's does, and so does its wait:
        # failed reads and writes are asked again once the agent answers.
        holders = [self.hold(prefix=f"{self.prefix}/lock", gate="gate.lock")]
        holders += [self.hold("-n", "2", prefix=f"{self.prefix}/sem", gate=f"gate.sem{k}")
                    for k in range(2)]
        waiters = {name: self.start_lock(*flags, f"{self.prefix}/{name}",
                                         "touch " + self.path(f"ran.{name}"))
                   for name, flags in (("lock", ()), ("sem", ("-n", "2")))}
        self.wait_waiting(len(holders) + len(waiters))
        sessions = self.new_sessions()
        for kind in self.outages():
            with self.subTest(kind=kind.__name__):
                self.outage(kind, sessions)
                for waiter in waiters.values():
                    self.assert_running(waiter)
        for holder in holders:
            self.assert_running(holder)
        for gate in ("gate.lock", "gate.sem0"):
            self.release(gate)
        for name, waiter in waiters.items():
            self.assert_succeeds(waiter)
            self.assertTrue(os.path.exists(self.path(f"ran.{name}")))
        self.release("gate.sem1")
        for holder in holders:
            self.assert_succeeds(holder)
        self.assert_nothing_left()

    def outages(self):
        return (self.five_xx, self.closed_connections, self.hung_requests, self.paused_agent)

    def outage(self, kind, sessions):
        """One outage; returns once every session in `sessions` has been renewed after it, so
        that the next one begins with full leases."""
        began = time.monotonic()
        end = kind()
        let_pass(max(0.0, began + 2.5 - time.monotonic()))  # the outage itself
        end()
        self.consul.heal()
        over = time.monotonic()
        wait_for(lambda: all(self.requests_since(over, f"/v1/session/renew/{s}")
                             for s in sessions), 15, "a renewal of every session")


class PacingTest(ConsulFaultCase):
    WINDOW = 3.0

    def test_blocking_queries_that_do_not_block_are_paced(self):
        """A lock (-n 1) and a semaphore (-n 2), each held and waited for, side by side: the
        faults are the whole double's."""
        holders, waiters, sessions = {}, {}, 0
        for n in (1, 2):
            prefix = f"{self.prefix}/n{n}"
            holders[n] = [self.hold("-n", str(n), prefix=prefix, gate=f"gate{n}.{k}")
                          for k in range(n)]
            waiters[n] = self.start_lock("-n", str(n), prefix, "touch " + self.path(f"ran{n}"))
            sessions += n + 1
            self.wait_waiting(sessions)
        pids = [p.pid for n in (1, 2) for p in (*holders[n], waiters[n])]
        # An idle hold and an idle wait cost about nothing.
        cpu = sum(cpu_seconds(p) for p in pids)
        let_pass(self.WINDOW)
        idle_cpu = sum(cpu_seconds(p) for p in pids) - cpu
        self.assertLess(idle_cpu, 0.1 * SLOW)
        for mode in ("unchanged", "backwards", "zero", "spurious"):
            cpu = sum(cpu_seconds(p) for p in pids)
            began = time.monotonic()
            self.consul.index_fault(mode, self.WINDOW)
            self.consul.drop_connections()  # the waiting queries ask again, faulted
            let_pass(self.WINDOW)  # the fault's length is what is under test
            spent = sum(cpu_seconds(p) for p in pids) - cpu
            asked = len(self.requests_since(began, "/v1/kv/"))
            self.consul.heal()
            # Paced from 50 ms up to 1 s: about 8 queries each in 3 s (16 when each is
            # followed by a fresh read), where a spinning client sends thousands.
            self.assertLess(asked, 25 * len(pids), f"{mode}: {asked} requests")
            self.assertLess(spent, 0.3 * SLOW, f"{mode}: {spent:.2f}s of CPU")
        for n in (1, 2):
            for holder in holders[n]:
                self.assert_running(holder)
            self.assert_running(waiters[n])
            for k in range(n):
                self.release(f"gate{n}.{k}")
            self.assert_succeeds(waiters[n])
            self.assertTrue(os.path.exists(self.path(f"ran{n}")))
            for holder in holders[n]:
                self.assert_succeeds(holder)
        self.assert_nothing_left()


class BadReplyTest(ConsulFaultCase):
    def run_refused(self, *args, within=None):
        """Runs lock, which must fail with one line, exit 1 and no child; returns stderr."""
        ran = self.path("ran")
        start = time.monotonic()
        r = self.run_lock(*args, "touch " + ran)
        if within is not None:
            self.assertLess(time.monotonic() - start, within * SLOW, r.stderr)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertFalse(os.path.exists(ran))
        self.assert_one_line(r.stderr)
        return r.stderr

    def test_a_session_id_that_is_not_a_uuid_is_refused_at_once_and_never_used(self):
        for body in ('{"ID":"../../kv/x"}', '{"ID":""}', '{"ID":"a/b?c#d"}', '{}',
                     '{"ID":7}', "<html>oops</html>", ""):
            for n in ("1", "2"):
                with self.subTest(body=body, n=n):
                    self.consul.clear_requests()
                    self.consul.reply_fault("/v1/session/create", method="PUT", body=body)
                    err = self.run_refused("-n", n, "-timeout", "30s", self.prefix, within=5)
                    self.assertRegex(err, r"^lock: Consul agent at 127\.0\.0\.1:\d+: create "
                                          r"session: malformed reply \(.+\)\n$")
                    # Nothing was asked with it: no cleanup, and surely no write elsewhere.
                    self.assertEqual([q["path"] for q in self.consul.requests()],
                                     ["/v1/session/create"])
                    self.assertIsNone(self.consul.get("x"))
        self.assert_nothing_left()

    def test_malformed_kv_replies_start_nothing(self):
        lock = f"/v1/kv/{self.prefix}/.lock"
        listing = f"/v1/kv/{self.prefix}/"
        json_headers = {"Content-Type": "application/json", "X-Consul-Index": "5"}
        read_lock = r"read key '[^']+/\.lock': "
        entry = ('[{"LockIndex":0,"Key":"%s/.lock","Flags":%d,"Value":null,'
                 '"CreateIndex":5,"ModifyIndex":5}]' % (self.prefix, LOCK_FLAGS))
        cases = [
            ("1", dict(path=lock, method="GET", body="not json", headers=json_headers),
             r"read key '[^']+/\.lock': malformed reply \(not a JSON array of entries\)"),
            ("1", dict(path=lock, method="GET", body=entry,
                       headers={"Content-Type": "application/json", "X-Consul-Index": "abc"}),
             read_lock + r"malformed reply \(X-Consul-Index \"abc\" is not a whole number from 0 up\)"),
            ("1", dict(path=lock, method="GET", body=entry, headers={}),
             read_lock + r"malformed reply \(X-Consul-Index missing\)"),
            ("1", dict(path=lock, method="GET", body='[{"Key":"elsewhere","ModifyIndex":1}]',
                       headers=json_headers),
             read_lock + r"malformed reply \(key 'elsewhere' was not asked for\)"),
            ("1", dict(path=lock, method="GET", headers=json_headers,
                       body='[{"Key":"%s/.lock","Value":"%%%%","ModifyIndex":1}]' % self.prefix),
             read_lock + r"malformed reply \(the value of '[^']+' is not base64\)"),
            ("1", dict(path=lock, method="PUT", query="acquire=", body="maybe"),
             r"acquire key '[^']+': malformed reply \(\"maybe\" where true or false was expected\)"),
            ("2", dict(path=listing, method="GET", query="recurse", headers=json_headers,
                       body='[{"Key":"%s/x","ModifyIndex":"7"}]' % self.prefix),
             r"read keys under '[^']+/': malformed reply \(ModifyIndex is not a whole number"),
            ("2", dict(path=listing, method="PUT", prefix=True, query="cas=", body="yes"),
             r"write key '[^']+/\.lock': malformed reply"),
        ]
        for n, fault, message in cases:
            with self.subTest(n=n, fault=fault):
                self.consul.reply_fault(**fault)
                err = self.run_refused("-n", n, self.prefix)
                self.assertRegex(err, r"^lock: Consul agent at 127\.0\.0\.1:\d+: " + message)
                self.assert_nothing_left()

    def test_endless_replies_are_cut_off_with_bounded_memory(self):
        cases = [("1", f"/v1/kv/{self.prefix}/.lock", "read key"),
                 ("2", f"/v1/kv/{self.prefix}/", "read keys under")]
        for n, path, op in cases:
            with self.subTest(n=n):
                self.consul.clear_requests()
                self.consul.reply_fault(path, method="GET", mode="endless")
                # The session's destruction is held back a moment, so that the process is
                # still there to be measured once the reply has been cut off.
                self.consul.reply_fault("/v1/session/destroy/", prefix=True, mode="hang",
                                        hang_seconds=0.5)
                err_path = self.path(f"err{n}")
                with open(err_path, "w") as err:
                    p = self.start_lock("-n", n, self.prefix, "touch " + self.path("ran"),
                                        stdout=subprocess.DEVNULL, stderr=err)
                    wait_for(lambda: any(q["path"].startswith("/v1/session/destroy/")
                                         for q in self.consul.requests()) or p.poll() is not None,
                             what="lock to give up on the endless reply")
                    rss = peak_rss(p.pid)
                    code = p.wait(timeout=10 * SLOW)
                self.assertEqual(code, 1)
                self.assertGreater(rss, 0, "lock ended before it could be measured")
                self.assertLess(rss, 64 * MB * SLOW)  # the sanitizers need room of their own
                err = read_file(err_path)
                self.assert_one_line(err)
                self.assertRegex(err, rf"^lock: Consul agent at [^:]+:\d+: {op} '[^']+': "
                                      r"the reply is larger than 4 MiB\n$")
                self.assertFalse(os.path.exists(self.path("ran")))
                self.assert_nothing_left()
        with self.subTest(what="session create"):
            self.consul.reply_fault("/v1/session/create", mode="endless")
            err = self.run_refused(self.prefix)
            self.assertIn("create session: the reply is larger than 4 MiB", err)

    def test_an_acquire_that_said_true_counts_only_once_read_back(self):
        # The first acquire of .lock answers true without taking it: lock must look again and
        # start the child only once its session really holds the key.
        self.consul.clear_requests()
        self.consul.reply_fault(f"/v1/kv/{self.prefix}/.lock", method="PUT", query="acquire=",
                                body="true")
        holder = self.hold(prefix=self.prefix, before=self.child_env_dump())
        env = self.child_env()
        self.assertEqual(self.session_of(self.prefix), env["session"])
        self.assertEqual(self.entry(f"{self.prefix}/.lock")["ModifyIndex"], env["token"])
        acquires = [q for q in self.consul.requests()
                    if q["method"] == "PUT" and "acquire=" in q["query"]]
        self.assertEqual(len(acquires), 2)
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()

    def test_a_semaphore_slot_counts_only_once_its_holders_list_us(self):
        # The first check-and-set of .lock answers true without writing: lock must read the
        # holders back, find itself missing, and take a slot for real before the child starts.
        self.consul.clear_requests()
        self.consul.reply_fault(f"/v1/kv/{self.prefix}/.lock", method="PUT", query="cas=",
                                body="true")
        holder = self.hold("-n", "2", prefix=self.prefix, before=self.child_env_dump())
        env = self.child_env()
        lock = self.entry(f"{self.prefix}/.lock")
        self.assertIn(env["session"], json.loads(lock["Value"])["Holders"])
        cas = [q for q in self.consul.requests() if q["method"] == "PUT" and "cas=" in q["query"]]
        self.assertEqual(len(cas), 2)
        reread = [q for q in self.consul.requests() if cas[0]["seq"] < q["seq"] < cas[1]["seq"]
                  and q["method"] == "GET" and "consistent" in q["query"]]
        self.assertTrue(reread, "no read-back between the two check-and-sets")
        self.assertEqual(env["token"], lock["ModifyIndex"])
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()


class MessageTest(ConsulFaultCase):
    def test_503_names_the_agent_the_operation_and_the_status(self):
        self.consul.fail_5xx(30, status=503, body="No cluster leader")
        r = self.run_lock(self.prefix, "touch " + self.path("ran"))
        self.consul.heal()
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, f"lock: Consul agent at {self.consul.http_addr}: create "
                                   "session: 503 Service Unavailable (No cluster leader)\n")
        self.assertFalse(os.path.exists(self.path("ran")))

    def test_server_text_in_a_message_is_escaped_and_cut(self):
        self.consul.fail_5xx(30, status=500, body="bad\x1b[2J\nnews " + "x" * 1000)
        r = self.run_lock(self.prefix, "true")
        self.consul.heal()
        self.assertEqual(r.returncode, 1)
        self.assert_one_line(r.stderr)
        self.assertIn("500 Internal Server Error (bad\\x1b[2J\\nnews xxx", r.stderr)
        self.assertNotIn("\x1b", r.stderr)
        self.assertLess(len(r.stderr), 400)

    def test_retry_after_is_honoured_within_the_timeout(self):
        self.consul.clear_requests()
        self.consul.reply_fault("/v1/session/create", status=503, body="No cluster leader",
                                headers={"Retry-After": "1"})
        r = self.run_lock("-timeout", "10s", self.prefix, "touch " + self.path("ran"))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        creates = [q["at"] for q in self.consul.requests() if q["path"] == "/v1/session/create"]
        self.assertEqual(len(creates), 2)
        self.assertGreaterEqual(creates[1] - creates[0], 0.9)
        self.assert_nothing_left()

    def test_retry_after_past_the_timeout_fails_at_once(self):
        self.consul.clear_requests()
        self.consul.reply_fault("/v1/session/create", status=503, body="No cluster leader",
                                headers={"Retry-After": "30"})
        start = time.monotonic()
        r = self.run_lock("-timeout", "2s", self.prefix, "touch " + self.path("ran"))
        self.assertLess(time.monotonic() - start, 1.5 * SLOW)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, r"create session: 503 Service Unavailable \(No cluster "
                                   r"leader\)\n$")
        self.assertEqual(len([q for q in self.consul.requests()
                              if q["path"] == "/v1/session/create"]), 1)

    def test_retry_after_while_waiting_is_waited_out(self):
        holder = self.hold(prefix=self.prefix)
        # The holder's watch on its key must be blocking already, or the fault meant for the
        # waiter could answer it instead.
        wait_for(lambda: any(q["path"] == f"/v1/kv/{self.prefix}/.lock" and "index=" in q["query"]
                             for q in self.consul.requests()), what="the holder's watch")
        self.consul.clear_requests()
        self.consul.reply_fault(f"/v1/kv/{self.prefix}/.lock", method="GET", query="index=",
                                status=503, body="No cluster leader",
                                headers={"Retry-After": "1"})
        waiter = self.start_lock("-timeout", "30s", self.prefix, "touch " + self.path("ran"))

        def blocking_queries():
            return [q["at"] for q in self.consul.requests() if "index=" in q["query"]]
        wait_for(lambda: len(blocking_queries()) >= 2, 10, "the waiter to ask again")
        waits = blocking_queries()
        self.assertGreaterEqual(waits[1] - waits[0], 0.9)
        self.assert_running(waiter)
        self.release()
        self.assert_succeeds(holder)
        self.assert_succeeds(waiter)
        self.assertTrue(os.path.exists(self.path("ran")))
        self.assert_nothing_left()


class StatusLookupTest(StatusLookupCutShort, ConsulFaultCase):
    """A stop signal while the agent leaves a status lookup unanswered (the test is
    StatusLookupCutShort's)."""

    @property
    def lookup_prefix(self):
        return self.prefix

    def hold_ahead(self):
        holder = self.hold(prefix=self.prefix)

        def let_go():
            self.consul.heal()
            self.release()
            self.assert_succeeds(holder)
        return let_go

    def hang_status_lookups(self):
        lookup = f"/v1/kv/{self.prefix}/"  # everything under the prefix; waiting reads .lock alone
        self.consul.reply_fault(lookup, times=None, mode="hang", hang_seconds=60)
        return lambda: any(q["path"] == lookup for q in self.consul.requests())


class ReleaseTest(ConsulFaultCase):
    def child_ending_at(self, n):
        """A child that says it started (the file `started<n>`), and writes the time it ends to
        the file `end<n>` once its gate (`gate<n>`) opens."""
        return (f'touch {self.path(f"started{n}")}; '
                f'while [ ! -e {self.path(f"gate{n}")} ]; do sleep 0.01; done; '
                f'python3 -c "import time; print(time.monotonic())" > {self.path(f"end{n}")}')

    def test_a_hung_agent_at_release_costs_at_most_3s(self):
        for n in ("1", "2"):
            with self.subTest(n=n):
                holder = self.start_lock("-n", n, "-session-ttl", "10s", self.prefix,
                                         self.child_ending_at(n))
                self.wait_file(f"started{n}")
                sessions = self.new_sessions()
                hung = time.monotonic()
                self.consul.reply_fault("/", prefix=True, times=None, mode="hang",
                                        hang_seconds=60)
                try:
                    # A renewal in flight (one every 10s/3) must not hold the release up either.
                    wait_for(lambda: self.requests_since(hung, "/v1/session/renew/"),
                             what="a renewal the agent leaves unanswered")
                    self.release(f"gate{n}")
                    code, _, err = self.finish(holder, timeout=30)
                    exited = time.monotonic()
                finally:  # a failed round must not leave the next one a hung agent, or litter
                    self.consul.heal()
                    for s in sessions:  # what was left goes with the session
                        self.consul.session_destroy(s)
                    for e in self.kv():
                        self.consul.delete(e["Key"])
                ended = float(self.wait_file(f"end{n}", "\n"))
                # Past the 3 s: the child's and lock's own exits, slower under the sanitizers.
                self.assertLess(exited - ended, 3.0 + 0.5 * SLOW)
                self.assertEqual(code, 0, err)
                self.assert_one_line(err)
                self.assertRegex(err, r"^lock: could not finish cleaning up \(Consul agent at "
                                      r"[^)]*cannot reach it.*\); session [0-9a-f-]{36} expires by "
                                      r"itself after its TTL of 10s")
        self.assert_nothing_left()

    def test_a_wait_given_up_while_the_agent_hangs_ends_within_3s(self):
        for n in ("1", "2"):
            with self.subTest(n=n):
                # The holders' sessions outlast the hang by far, whenever they last renewed:
                # only the waiter is under test.
                holders = [self.hold("-n", n, "-session-ttl", "60s", prefix=self.prefix,
                                     gate=f"gate{n}.{k}")
                           for k in range(int(n))]
                held_by = self.new_sessions()
                waiter = self.start_lock("-n", n, "-timeout", "2s", self.prefix,
                                         "touch " + self.path("ran"))
                self.wait_waiting(int(n) + 1)
                # Whatever the waiter asks from now on gets no answer; its wait is already out.
                self.consul.reply_fault("/", prefix=True, times=None, mode="hang",
                                        hang_seconds=60)
                started = time.monotonic()
                try:
                    code, _, err = self.finish(waiter)
                    spent = time.monotonic() - started
                finally:
                    self.consul.heal()
                self.assertLess(spent, 2 + 3.0 + 0.5 * SLOW)
                self.assertEqual(code, 1)
                self.assertEqual(len(err.splitlines()), 2, err)
                self.assertRegex(err, r"lock: could not finish cleaning up \(.*cannot reach it")
                self.assertRegex(err, r"timed out")
                self.assertFalse(os.path.exists(self.path("ran")))
                for s in self.new_sessions() - held_by:
                    self.consul.session_destroy(s)
                for k, holder in enumerate(holders):
                    self.release(f"gate{n}.{k}")
                    self.assert_succeeds(holder)
                self.assert_nothing_left()

    def test_a_5xx_burst_at_release_leaves_nothing_behind(self):
        for n in ("1", "2"):
            with self.subTest(n=n):
                holder = self.hold("-n", n, prefix=self.prefix, gate=f"gate{n}")
                # The release's first writes (its own, whenever they come: the monitor only
                # reads, and the renewals go to /v1/session) get 500.
                writes = f"/v1/kv/{self.prefix}/"
                self.consul.reply_fault(writes, method="PUT", prefix=True, times=2, status=500,
                                        body="No cluster leader")
                released = time.monotonic()
                self.release(f"gate{n}")
                code, _, err = self.finish(holder)
                self.assertEqual((code, err), (0, ""))
                asked = [q for q in self.requests_since(released, writes) if q["method"] == "PUT"]
                self.assertGreaterEqual(len(asked), 2, "the release never met the 500s")
                self.consul.heal()
                self.assert_nothing_left()


if __name__ == "__main__":
    unittest.main()
