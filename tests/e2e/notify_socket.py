"""A stand-in for systemd's notification socket (sd_notify(3)): a bound datagram socket that a thread
reads as datagrams come, keeping each with the sender's pid (as systemd checks it) and the time it
arrived."""

import itertools
import os
import re
import select
import signal
import socket
import struct
import threading
import time
import types
import uuid

from harness import SLOW, send, wait_for


class Datagram:
    """One notification: its place in the socket's queue, when it arrived, the sender's pid, and
    its KEY=value assignments in order (lines that are not one are kept apart, as malformed)."""

    def __init__(self, seq, arrived, pid, raw):
        self.seq, self.time, self.pid, self.raw = seq, arrived, pid, raw
        lines = raw.decode("utf-8", "surrogateescape").split("\n")
        if lines[-1] == "":
            lines.pop()  # a final newline is allowed, as sd_notify allows it
        self.fields, self.malformed = [], []
        for line in lines:
            key, eq, value = line.partition("=")
            if eq and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key):
                self.fields.append((key, value))
            else:
                self.malformed.append(line)

    def get(self, key):
        values = [v for k, v in self.fields if k == key]
        return values[-1] if values else None

    def __repr__(self):
        return f"#{self.seq} +{self.time:.3f}s pid {self.pid}: {self.raw!r}"


class NotifySocket:
    """A bound SOCK_DGRAM socket, in the scratch directory or in the abstract namespace, that a
    thread reads from as datagrams come. `address` is what NOTIFY_SOCKET says. `on_datagram`, if
    set, runs in that thread as each one arrives, before anyone else sees it: a check of what is
    true at the very moment lock said something."""

    def __init__(self, testcase, abstract=False):
        if abstract:
            name = f"lock-e2e-{uuid.uuid4().hex}"
            self.address, self.bind_address = "@" + name, "\0" + name
        else:
            self.address = self.bind_address = testcase.path("notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        # The kernel then tells us each sender's pid, as it tells systemd.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(self.bind_address)
        self.on_datagram = None
        self.hook_errors = []
        self.received = []
        self.changed = threading.Condition()
        self.epoch = time.monotonic()
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()
        testcase.addCleanup(self.close)

    def close(self):
        os.write(self._stop_w, b"x")
        self._thread.join()
        for fd in (self._stop_r, self._stop_w):
            os.close(fd)
        self.sock.close()

    def _receive(self):
        creds = struct.calcsize("3i")
        while True:
            ready, _, _ = select.select([self.sock, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            raw, ancillary, _, _ = self.sock.recvmsg(1 << 16, socket.CMSG_SPACE(creds))
            arrived = time.monotonic()
            pid = next((struct.unpack("3i", data[:creds])[0] for level, kind, data in ancillary
                        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS)), None)
            datagram = Datagram(len(self.received), arrived - self.epoch, pid, raw)
            if self.on_datagram:
                try:
                    self.on_datagram(datagram)
                except Exception as e:  # reported by the test, not lost in this thread
                    self.hook_errors.append(e)
            with self.changed:
                self.received.append(datagram)
                self.changed.notify_all()

    def datagrams(self, pid=None):
        """What arrived so far (from `pid` only, if given), in the order it was queued."""
        with self.changed:
            return [d for d in self.received if pid is None or d.pid == pid]

    def wait_until(self, condition, timeout, what):
        """Waits until condition() is truthy, re-checking as each datagram comes; fails the test at
        the deadline with everything that did arrive."""
        deadline = time.monotonic() + timeout * SLOW
        with self.changed:
            while True:
                value = condition()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout * SLOW:.1f}s waiting for "
                                         f"{what}; received: {self.received}")
                self.changed.wait(left)

    def wait_for_message(self, predicate, timeout=10.0, what="a datagram", pid=None, after=-1):
        """The first datagram (from `pid`, queued after number `after`) that satisfies
        `predicate`, once it has arrived."""
        def found():
            return next((d for d in self.received
                         if d.seq > after and (pid is None or d.pid == pid) and predicate(d)), None)
        return self.wait_until(found, timeout, what)

    def sync(self):
        """Sends a datagram of our own and waits for it: the socket's queue is in order, so
        everything sent before now (by a lock that has exited, say) has then arrived."""
        token = uuid.uuid4().hex
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(f"SYNC={token}".encode(), self.bind_address)
        self.wait_for_message(lambda d: d.get("SYNC") == token, 5, "our own datagram")



class NotifiesWhileWaiting:
    """For the server backends' test cases (each test with a prefix of its own, self.prefix, and an
    assert_nothing_left): what systemd hears from a `lock -ready=wait` that waits behind holders,
    as test_systemd.py shows it for the local backend. The test case gives holder_records(): the
    JSON holder records its backend stores under self.prefix, read from the server itself."""

    NOTIFY_VARS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
    # The first look at the holders is 0.5 s into the wait, the next ones every 2 s: a change
    # shows within one refresh, and a lookup 2 s late would already be late.
    FIRST_LOOK = 0.5 + 1.5
    REFRESH = 2.0 + 1.5

    def setUp(self):
        super().setUp()
        # The suite itself may run under systemd: lock must see only the variables a test gives.
        for var in self.NOTIFY_VARS:
            self.env.pop(var, None)

    def holder_records(self):
        raise NotImplementedError

    def since_of(self, pid):
        """When the holder lock `pid` took the prefix, as its record on the server says."""
        def found():
            return next((r["since"] for r in self.holder_records()
                         if isinstance(r, dict) and r.get("pid") == pid), None)
        return wait_for(found, what=f"the holder record of pid {pid}")

    def waiting_for(self, limit):
        return self.prefix if limit == 1 else f"one of {limit} slots of {self.prefix}"

    def behind(self, limit, holders):
        """Every status line that names `holders` (processes that hold), in any order: the order
        is lock's to choose."""
        host = socket.gethostname()
        parts = [f"pid {h.pid} on {host} since {self.since_of(h.pid)}" for h in holders]
        return {f"waiting for {self.waiting_for(limit)} ({len(holders)} of {limit} held: "
                f"{', '.join(order)})" for order in itertools.permutations(parts)}

    def start_notified_waiter(self, limit):
        """Starts `lock -n limit -ready=wait` whose child writes its token and stays until
        release("waiter-go"). Returns, once it said what it waits for and then READY=1 (before
        its child ran), w: w.sock, w.proc, w.limit, w.started (time.monotonic()), w.first (the
        first status) and w.ready (READY=1)."""
        sock = NotifySocket(self)
        ran_at_ready = []
        sock.on_datagram = lambda d: d.get("READY") == "1" and ran_at_ready.append(
            self.waiter_child_ran())
        started = time.monotonic()
        waiter = self.start_lock("-n", str(limit), "-ready=wait", self.prefix,
                                 f"echo $LOCK_FENCING_TOKEN > {self.path('token')}; "
                                 f"touch {self.path('waiter.held')}; "
                                 f"while [ ! -e {self.path('waiter-go')} ]; do sleep 0.01; done",
                                 env=dict(self.env, NOTIFY_SOCKET=sock.address))
        first = sock.wait_for_message(lambda d: d.get("STATUS") is not None, pid=waiter.pid,
                                      what="the first status")
        self.assertEqual(first.get("STATUS"), f"waiting for {self.waiting_for(limit)}")
        ready = sock.wait_for_message(lambda d: d.get("READY") == "1", pid=waiter.pid,
                                      what="READY=1 while waiting")
        self.assertGreater(ready.seq, first.seq)
        self.assertEqual(ran_at_ready, [False], "READY=1 came once the child ran, not in the wait")
        return types.SimpleNamespace(sock=sock, proc=waiter, limit=limit, started=started,
                                     first=first, ready=ready)

    def waiter_child_ran(self):
        return os.path.exists(self.path("token")) or os.path.exists(self.path("waiter.held"))

    def wait_status(self, w, expected, within, since, after=-1):
        """The status in `expected` (a set) that the waiter `w` says within `within` seconds of
        `since` (time.monotonic()), while it still waits."""
        said = w.sock.wait_for_message(lambda d: d.get("STATUS") in expected, within, expected,
                                       pid=w.proc.pid, after=after)
        self.assertLess(said.time + w.sock.epoch - since, within * SLOW, "the holders came late")
        self.assert_still_waiting(w)
        return said

    def assert_still_waiting(self, w):
        if w.proc.poll() is not None:
            self.fail(f"the waiter ended early: {self.finish(w.proc)}")
        self.assertFalse(self.waiter_child_ran(), "the waiter's child ran while others held")

    def finish_notified_waiter(self, w, after):
        """Once the waiter `w` can hold: it says what it holds with the token its child sees
        (after datagram number `after`), its child ends, and it said READY=1 once, STOPPING=1
        as the child exited, no line twice in a row and nothing but KEY=value lines. Returns
        its status lines."""
        sock, waiter, what = w.sock, w.proc, self.waiting_for(w.limit)
        holding = sock.wait_for_message(
            lambda d: (d.get("STATUS") or "").startswith(f"holding {what}, token "),
            pid=waiter.pid, after=after, what="the holding status")
        token = self.wait_file("token", "\n").strip()
        self.assertEqual(holding.get("STATUS"), f"holding {what}, token {token}")
        self.release("waiter-go")
        self.assert_succeeds(waiter)

        sock.sync()
        self.assertEqual(sock.hook_errors, [])
        ours = sock.datagrams(waiter.pid)
        self.assertEqual([d for d in sock.datagrams() if d.pid not in (waiter.pid, os.getpid())],
                         [], "notifications not from lock")
        for d in ours:
            self.assertEqual(d.malformed, [], d)
            self.assertNotIn("MAINPID", [key for key, _ in d.fields], d)
        self.assertEqual([d.seq for d in ours if d.get("READY") == "1"], [w.ready.seq], ours)
        stopping = [d for d in ours if d.get("STOPPING") == "1"]
        self.assertTrue(stopping, f"no STOPPING=1 in {ours}")
        self.assertGreater(stopping[0].seq, holding.seq)
        self.assertTrue((stopping[0].get("STATUS") or "").startswith("the child exited"), stopping)
        texts = [d.get("STATUS") for d in ours if d.get("STATUS") is not None]
        self.assertEqual([a for a, b in zip(texts, texts[1:]) if a == b], [], texts)
        return texts

    def check_waiting_then_holding(self, limit, holders):
        """A `lock -n limit -ready=wait` behind `holders` (locks holding with -n limit and gates
        go0, go1, ...) says what it waits for, READY=1 while it waits, whom it waits behind,
        then what it holds with its child's token, and STOPPING=1 as its child exits."""
        expected = self.behind(limit, holders)
        w = self.start_notified_waiter(limit)
        behind = self.wait_status(w, expected, self.FIRST_LOOK, w.started)
        # Nothing else was said while the holders held: no other holders, no holding.
        said = {d.get("STATUS") for d in w.sock.datagrams(w.proc.pid)} - {None}
        self.assertLessEqual(said, {w.first.get("STATUS")} | expected)

        self.release("go0")
        self.finish_notified_waiter(w, behind.seq)
        for k, holder in enumerate(holders):
            self.release(f"go{k}")
            self.assert_succeeds(holder)
        self.assert_nothing_left()

    def test_notify_a_waiter_is_ready_names_the_holder_then_holds(self):
        self.check_waiting_then_holding(1, [self.hold(prefix=self.prefix, gate="go0")])

    def test_notify_a_semaphore_waiter_names_every_holder(self):
        holders = [self.hold("-n", "2", prefix=self.prefix, gate=f"go{k}") for k in range(2)]
        self.check_waiting_then_holding(2, holders)


class StatusLookupCutShort:
    """For the server backends' fault cases. Under systemd a waiter looks the holders up for its
    status line, 0.5 s into the wait and every 2 s after. The server answers every other request,
    but not that read: SIGTERM must still end the wait at once, not when the read's time is up.
    The test case gives lookup_prefix, hold_ahead() (a holder ahead that stays; returns what lets
    it go), hang_status_lookups() (returns whether a lookup was asked since) and
    assert_nothing_left()."""

    def test_a_stop_signal_cuts_short_a_status_lookup_the_server_leaves_unanswered(self):
        for var in NotifiesWhileWaiting.NOTIFY_VARS:
            self.env.pop(var, None)
        let_go = self.hold_ahead()
        asked = self.hang_status_lookups()
        sock = NotifySocket(self)
        ran = self.path("ran")
        waiter = self.start_lock(self.lookup_prefix, "touch " + ran,
                                 env=dict(self.env, NOTIFY_SOCKET=sock.address))
        wait_for(asked, what="the waiter's status lookup")
        start = time.monotonic()
        send(waiter, signal.SIGTERM)
        code, out, err = self.finish(waiter)
        self.assertLess(time.monotonic() - start, 1.5 * SLOW)
        self.assertEqual((code, out, err),
                         (1, "", "lock: interrupted by SIGTERM while waiting for the lock\n"))
        self.assertFalse(os.path.exists(ran))
        let_go()
        self.assert_nothing_left()
