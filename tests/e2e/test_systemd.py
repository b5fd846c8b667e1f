"""systemd's notification protocol (sd_notify): with NOTIFY_SOCKET set, lock tells its unit what it
waits for, whom it waits behind, what it holds, when it is ready and when it stops, and pings the
watchdog; the child never sees those variables, and a socket that cannot be reached changes
nothing. A stand-in for systemd's socket receives the datagrams here, with the sender's pid (as
systemd checks it) and the time each arrived."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest
import uuid

from harness import LOCK, SLOW, LockTestCase, pid_alive, read_file, send, wait_for
from notify_socket import NotifySocket

NOTIFY_VARS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
HOST = socket.gethostname()

# What a child runs to send a datagram of its own to the socket (its trap for TERM does): where
# it lands in the socket's queue, after or before lock's STOPPING=1, orders the two for good.
SENDER = """\
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(sys.argv[2].encode(), sys.argv[1])
"""


def statuses(datagrams):
    return [d.get("STATUS") for d in datagrams if d.get("STATUS") is not None]


def is_ready(d):
    return d.get("READY") == "1"


def is_watchdog(d):
    return d.get("WATCHDOG") == "1"


def first_stopping(testcase, datagrams):
    """The datagram that began the stop (lock may say STOPPING=1 again as the stop goes on)."""
    stopping = [d for d in datagrams if d.get("STOPPING") == "1"]
    testcase.assertTrue(stopping, f"no STOPPING=1 in {datagrams}")
    return stopping[0]


class NotifyTestCase(LockTestCase):

    def setUp(self):
        super().setUp()
        # The suite itself may run under systemd: lock must see only the variables a test gives.
        for var in NOTIFY_VARS:
            self.env.pop(var, None)
        with open(self.path("send.py"), "w") as f:
            f.write(SENDER)

    def notify_socket(self, abstract=False):
        return NotifySocket(self, abstract)

    def notify_env(self, sock, **extra):
        return dict(self.env, NOTIFY_SOCKET=sock.address, **extra)

    def gated(self, name, before=""):
        """A child that says it runs (touches `name`.held) and stays until the file `name`
        exists."""
        return (f"{before}touch {self.path(name)}.held; "
                f"while [ ! -e {self.path(name)} ]; do sleep 0.01; done")

    def trapping_child(self, sock, name="child"):
        """A child that, on SIGTERM, sends CHILD=term to the socket and exits 0; it stays until
        then. Quiet, so that the shell's report of its killed sleep is not mixed in."""
        return (f"exec 2>/dev/null; trap '{sys.executable} {self.path('send.py')} {sock.address} "
                f"CHILD=term; exit 0' TERM; touch {self.path(name)}.held; "
                "while :; do sleep 0.05; done")

    def wait_held(self, proc, name):
        wait_for(lambda: os.path.exists(self.path(name) + ".held") or proc.poll() is not None,
                 what=f"the child {name} to start")
        if proc.poll() is not None:
            self.fail(f"lock ended early: {self.finish(proc)}")

    def since_of(self, pid, prefix="p"):
        """When the holder `pid` took its slot, as its slot file records it."""
        d = os.path.join(self.state, prefix)
        records = [json.loads(read_file(os.path.join(d, f))) for f in os.listdir(d)
                   if f.startswith("slot.")]
        return next(r["since"] for r in records if r["pid"] == pid)

    def assert_protocol(self, sock, lock_pid):
        """Once lock has exited: everything lock sent has arrived; every datagram is KEY=value
        lines and came from lock itself (systemd, with NotifyAccess=main, drops any other
        sender's), never says MAINPID, and says READY=1 at most once. Returns lock's datagrams."""
        sock.sync()
        self.assertEqual(sock.hook_errors, [])
        ours = sock.datagrams(lock_pid)
        for d in ours:
            self.assertEqual(d.malformed, [], d)
            self.assertNotIn("MAINPID", [k for k, _ in d.fields], d)
        strangers = [d for d in sock.datagrams() if d.pid not in (lock_pid, os.getpid())
                     and d.get("CHILD") is None]
        self.assertEqual(strangers, [], f"notifications not from lock (pid {lock_pid})")
        self.assertLessEqual(sum(map(is_ready, ours)), 1, ours)
        return ours

    def traced(self, calls):
        """Runs lock under strace, tracing the system calls `calls` of lock and of its child,
        until its child runs and SIGTERM ends it. Returns lock's pid and the trace as (pid, call)
        pairs in the order strace saw them; skips where tracing is not allowed."""
        sock = self.notify_socket()
        trace = self.path("trace")
        env = self.notify_env(sock)
        # LeakSanitizer cannot work under ptrace; the rest of the sanitizers can.
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "detect_leaks=0"]))
        proc = subprocess.Popen(["strace", "-f", "-qq", "-s", "256", "-e", f"trace={calls}",
                                 "-e", "signal=none", "-o", trace, LOCK, "p", self.gated("child")],
                                env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        self.wait_held(proc, "child")
        # lock's pid (strace's child) is the sender of the notifications.
        lock_pid = sock.wait_for_message(is_ready, what="READY=1").pid
        # Killing strace at the end would leave lock running, untraced.
        self.addCleanup(lambda: pid_alive(lock_pid) and os.kill(lock_pid, signal.SIGKILL))
        os.kill(lock_pid, signal.SIGTERM)
        code, _, err = self.finish(proc)
        if code != 0 and err.startswith("strace:"):
            self.skipTest(f"cannot trace here: {err.strip()}")
        self.assertEqual((code, err), (0, ""))
        pairs = [line.split(None, 1) for line in read_file(trace).splitlines()]
        return lock_pid, [(int(pid), call) for pid, call in pairs]


class LifecycleTest(NotifyTestCase):

    def check_lifecycle(self, abstract):
        """waiting → holding (the child's token) → READY=1 once the child runs → stopping."""
        sock = self.notify_socket(abstract)
        script = self.gated("go", before=f"echo $LOCK_FENCING_TOKEN > {self.path('token')}; ")
        proc = self.start_lock("p", script, env=self.notify_env(sock))
        ready = sock.wait_for_message(is_ready, what="READY=1", pid=proc.pid)
        token = self.wait_file("token", "\n").strip()
        self.release("go")
        code, out, err = self.finish(proc)
        self.assertEqual((code, out, err), (0, "", ""))
        ours = self.assert_protocol(sock, proc.pid)

        texts = statuses(ours)
        self.assertEqual(texts[0], "waiting for p", ours)
        self.assertEqual(texts[1], f"holding p, token {token}", ours)
        holding = next(d for d in ours if d.get("STATUS") == texts[1])
        self.assertGreaterEqual(ready.seq, holding.seq, "READY=1 before the holding status")
        stopping = first_stopping(self, ours)
        self.assertGreater(stopping.seq, ready.seq)
        self.assertTrue((stopping.get("STATUS") or "").startswith("the child exited"), stopping)
        self.assertEqual(sum(map(is_ready, ours)), 1, ours)

    def test_a_filesystem_socket_hears_the_whole_run(self):
        self.check_lifecycle(abstract=False)

    def test_an_abstract_socket_hears_the_whole_run(self):
        self.check_lifecycle(abstract=True)

    @unittest.skipUnless(shutil.which("strace"), "needs strace")
    def test_ready_comes_once_the_child_is_execd(self):
        # Watching the child from the socket's side cannot order the two: vfork lets its caller
        # go on as soon as the exec can no longer fail, before the kernel has set up the new
        # program's arguments, and the datagram is read later still. The traced system calls can:
        # the watchdog's vfork returns, and then lock says READY=1.
        lock_pid, trace = self.traced("vfork,execve,sendto")
        started = next((i for i, (pid, c) in enumerate(trace)
                        if pid != lock_pid and re.search(r"vfork.*= \d+$", c)), None)
        ready = next((i for i, (pid, c) in enumerate(trace)
                      if pid == lock_pid and c.startswith("sendto(") and "READY=1" in c), None)
        self.assertIsNotNone(started, trace)
        self.assertIsNotNone(ready, trace)
        self.assertLess(started, ready, trace)
        child = int(re.search(r"= (\d+)$", trace[started][1]).group(1))
        # strace may split the child's execve into its start and its (successful) end.
        execs = [c for pid, c in trace if pid == child and "execve" in c]
        self.assertTrue(execs and execs[0].startswith('execve("/bin/sh", ["/bin/sh", "-c", ')
                        and execs[-1].endswith("= 0"), execs)

    def test_a_semaphore_says_one_of_n_slots(self):
        sock = self.notify_socket()
        proc = self.start_lock("-n", "3", "p", f"echo $LOCK_FENCING_TOKEN > {self.path('token')}",
                               env=self.notify_env(sock))
        self.assertEqual(self.finish(proc), (0, "", ""))
        texts = statuses(self.assert_protocol(sock, proc.pid))
        token = read_file(self.path("token")).strip()
        self.assertEqual(texts[:2], ["waiting for one of 3 slots of p",
                                     f"holding one of 3 slots of p, token {token}"])


class MinHoldTest(NotifyTestCase):

    def test_the_extra_hold_says_until_when(self):
        sock = self.notify_socket()
        proc = self.start_lock("-min-hold", "1s", "p", "true", env=self.notify_env(sock))
        self.assertEqual(self.finish(proc), (0, "", ""))
        ours = self.assert_protocol(sock, proc.pid)
        texts = statuses(ours)
        self.assertRegex(texts[-1], r"^held until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(-min-hold\)$", ours)
        exited = texts.index(next(t for t in texts if t.startswith("the child exited")))
        self.assertLess(exited, len(texts) - 1, "the extra hold said before the child's end")


class WaitingStatusTest(NotifyTestCase):

    def held_by(self, pid, since, limit=1, held=1):
        what = "p" if limit == 1 else f"one of {limit} slots of p"
        return f"waiting for {what} ({held} of {limit} held: pid {pid} on {HOST} since {since})"

    def test_the_status_names_the_holder_and_follows_a_change(self):
        first = self.hold(gate="first")
        first_since = self.since_of(first.pid)
        # A second contender queues ahead of the notifying one and holds next.
        second = self.start_lock("p", self.gated("second"))
        wait_for(lambda: self.ticket_of(second.pid), what="the second contender's ticket")
        sock = self.notify_socket()
        started = time.monotonic()
        waiter = self.start_lock("p", "true", env=self.notify_env(sock))

        first_status = sock.wait_for_message(lambda d: d.get("STATUS"), pid=waiter.pid,
                                             what="the first status")
        self.assertEqual(first_status.get("STATUS"), "waiting for p")
        expected = self.held_by(first.pid, first_since)
        sock.wait_for_message(lambda d: d.get("STATUS") == expected, 0.5 + 1.5, expected,
                              pid=waiter.pid)
        self.assertLess(time.monotonic() - started, 0.5 + 1.5 * SLOW, "the holders came late")
        # The refresh due about 2.5 s after the start would say the same again, so it is not sent.
        # Nothing to wait on but the clock: the point is that nothing comes.
        time.sleep(max(0.0, started + 3.0 - time.monotonic()))
        self.assertEqual(statuses(sock.datagrams(waiter.pid)), ["waiting for p", expected])

        self.release("first")
        self.wait_held(second, "second")
        changed = time.monotonic()
        expected = self.held_by(second.pid, self.since_of(second.pid))
        sock.wait_for_message(lambda d: d.get("STATUS") == expected, 2.0 + 1.5, expected,
                              pid=waiter.pid)
        self.assertLess(time.monotonic() - changed, 2.0 + 1.5 * SLOW, "the change came late")

        self.release("second")
        for proc in (first, second, waiter):
            self.assert_succeeds(proc)
        texts = statuses(self.assert_protocol(sock, waiter.pid))
        self.assertTrue(any(t.startswith("holding p, token ") for t in texts), texts)
        repeats = [a for a, b in zip(texts, texts[1:]) if a == b]
        self.assertEqual(repeats, [], texts)

    def test_a_semaphore_lists_every_holder(self):
        holders = [self.hold("-n", "2", gate=f"go{k}") for k in range(2)]
        parts = [f"pid {h.pid} on {HOST} since {self.since_of(h.pid)}" for h in holders]
        sock = self.notify_socket()
        waiter = self.start_lock("-n", "2", "p", "true", env=self.notify_env(sock))
        # Their order is lock's to choose.
        expected = {f"waiting for one of 2 slots of p (2 of 2 held: {a}, {b})"
                    for a, b in (parts, parts[::-1])}
        sock.wait_for_message(lambda d: d.get("STATUS") in expected, 0.5 + 1.5, expected,
                              pid=waiter.pid)
        for k, holder in enumerate(holders):
            self.release(f"go{k}")
            self.assert_succeeds(holder)
        self.assert_succeeds(waiter)
        texts = statuses(self.assert_protocol(sock, waiter.pid))
        self.assertEqual(texts[0], "waiting for one of 2 slots of p")


class ReadyTest(NotifyTestCase):

    def test_ready_wait_says_ready_once_in_the_queue(self):
        holder = self.hold(gate="first")
        sock = self.notify_socket()
        queued_at_ready = []
        sock.on_datagram = lambda d: is_ready(d) and queued_at_ready.append(self.ticket_of(d.pid))
        waiter = self.start_lock("-ready=wait", "p", self.gated("second"),
                                 env=self.notify_env(sock))
        sock.wait_for_message(is_ready, what="READY=1 while waiting", pid=waiter.pid)
        self.assertTrue(queued_at_ready[0], "READY=1 came before the waiter had its ticket")
        # The holder still holds, so this is READY=1 before the child.
        self.assertFalse(os.path.exists(self.path("second.held")))
        self.assertNotIn("holding", " ".join(statuses(sock.datagrams(waiter.pid))))

        self.release("first")
        self.assert_succeeds(holder)
        self.wait_held(waiter, "second")
        self.release("second")
        self.assert_succeeds(waiter)
        ours = self.assert_protocol(sock, waiter.pid)
        self.assertEqual(sum(map(is_ready, ours)), 1, "READY=1 again once it held")
        self.assertTrue(any(t.startswith("holding p, token ") for t in statuses(ours)), ours)

    def test_ready_wait_without_a_wait_says_ready_once(self):
        sock = self.notify_socket()
        proc = self.start_lock("-ready=wait", "p", "true", env=self.notify_env(sock))
        self.assertEqual(self.finish(proc), (0, "", ""))
        ours = self.assert_protocol(sock, proc.pid)
        self.assertEqual(sum(map(is_ready, ours)), 1, ours)

    def test_ready_takes_hold_or_wait(self):
        for value in ("hold", "wait"):
            with self.subTest(ready=value):
                r = self.run_lock(f"-ready={value}", "p", "echo ran")
                self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "ran\n", ""))
        r = self.run_lock("-ready=bogus", "p", "touch", self.path("ran"))
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertIn("-ready", r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))


class StoppingTest(NotifyTestCase):
    """STOPPING=1 goes out before the child is told to stop: the child's own datagram, sent from
    its trap for SIGTERM, must come after it in the socket's queue."""

    def stop_and_order(self, sock, proc, stop):
        self.wait_held(proc, "child")
        stop()
        child = sock.wait_for_message(lambda d: d.get("CHILD") == "term",
                                      what="the child's datagram from its trap")
        code, out, err = self.finish(proc)
        ours = self.assert_protocol(sock, proc.pid)
        stopping = first_stopping(self, ours)
        self.assertLess(stopping.seq, child.seq, "STOPPING=1 came after the child got SIGTERM")
        return code, err, stopping.get("STATUS") or ""

    def test_a_lost_lock_says_stopping_before_the_child_hears_of_it(self):
        sock = self.notify_socket()
        proc = self.start_lock("p", self.trapping_child(sock), env=self.notify_env(sock))
        code, err, status = self.stop_and_order(
            sock, proc, lambda: subprocess.run(["rm", "-rf", self.state], check=True))
        self.assertEqual(code, 1, err)
        self.assertIn("lock lost", err)
        self.assertTrue(status.startswith("stopping the child: lock lost: "), status)

    def test_sigterm_says_stopping_before_the_child_hears_of_it(self):
        sock = self.notify_socket()
        proc = self.start_lock("p", self.trapping_child(sock), env=self.notify_env(sock))
        code, err, status = self.stop_and_order(sock, proc, lambda: send(proc, signal.SIGTERM))
        self.assertEqual((code, err), (0, ""))
        self.assertEqual(status, "stopping the child: received SIGTERM")

    @unittest.skipUnless(shutil.which("strace"), "needs strace")
    def test_lock_sends_stopping_before_it_signals_the_child(self):
        # The child's datagram comes after STOPPING=1 however lock orders the two steps if the
        # child is slow to answer; lock's own system calls, traced, show the order it chose.
        lock_pid, trace = self.traced("sendto,kill")
        stopping = next((i for i, (pid, c) in enumerate(trace)
                         if pid == lock_pid and c.startswith("sendto(") and "STOPPING=1" in c), None)
        # The watchdog, which keeps the child's tree, signals it (a call that strace shows cut in
        # two, "<unfinished ...>", when another process's call came in between, counts as made).
        signalled = next((i for i, (pid, c) in enumerate(trace)
                          if re.match(r"kill\(-\d+, SIGTERM\b", c)), None)
        self.assertIsNotNone(stopping, trace)
        self.assertIsNotNone(signalled, trace)
        self.assertLess(stopping, signalled, trace)

    def test_sigterm_while_waiting_says_interrupted(self):
        holder = self.hold()
        sock = self.notify_socket()
        waiter = self.start_lock("p", "touch", self.path("ran"), env=self.notify_env(sock))
        wait_for(lambda: self.ticket_of(waiter.pid), what="the waiter's ticket")
        send(waiter, signal.SIGTERM)
        code, _, err = self.finish(waiter)
        self.assertEqual(code, 1, err)
        ours = self.assert_protocol(sock, waiter.pid)
        stopping = first_stopping(self, ours)
        self.assertIn("interrupted", stopping.get("STATUS") or "", stopping)
        self.assertFalse(any(map(is_ready, ours)), "READY=1 without ever holding")
        self.assertFalse(os.path.exists(self.path("ran")))
        self.release()
        self.assert_succeeds(holder)


class WatchdogTest(NotifyTestCase):
    USEC = 400000

    def pings(self, sock, pid, after=-1):
        return [d for d in sock.datagrams(pid) if is_watchdog(d) and d.seq > after]

    def assert_regular(self, pings, started):
        times = [d.time for d in pings]
        self.assertLess(times[0] - started, 1.0 * SLOW, "the first ping came late")
        gaps = [b - a for a, b in zip(times, times[1:])]
        self.assertLessEqual(max(gaps), self.USEC / 1e6 * SLOW, f"gaps between pings: {gaps}")

    def test_the_watchdog_is_pinged_while_waiting_and_while_the_child_runs(self):
        holder = self.hold(gate="first")
        sock = self.notify_socket()
        started = time.monotonic() - sock.epoch
        waiter = self.start_lock("p", self.gated("second"),
                                 env=self.notify_env(sock, WATCHDOG_USEC=str(self.USEC)))
        sock.wait_until(lambda: len(self.pings(sock, waiter.pid)) >= 4, 2.0,
                        "4 pings while waiting")
        self.assertFalse(os.path.exists(self.path("second.held")))
        self.release("first")
        self.assert_succeeds(holder)
        holding = sock.wait_for_message(lambda d: (d.get("STATUS") or "").startswith("holding"),
                                        pid=waiter.pid, what="the holding status")
        # At WATCHDOG_USEC/2, five pings take a second; two seconds is plenty.
        sock.wait_until(lambda: len(self.pings(sock, waiter.pid, holding.seq)) >= 5, 2.0,
                        "5 pings while the child runs")
        self.release("second")
        self.assert_succeeds(waiter)
        self.assert_protocol(sock, waiter.pid)
        self.assert_regular(self.pings(sock, waiter.pid), started)

    def test_watchdog_pid_naming_lock_itself_is_pinged(self):
        sock = self.notify_socket()
        started = time.monotonic() - sock.epoch
        # The shell's pid is lock's once it execs lock.
        proc = subprocess.Popen(["sh", "-c", 'export WATCHDOG_PID=$$; exec "$@"', "sh", LOCK, "p",
                                 self.gated("child")],
                                env=self.notify_env(sock, WATCHDOG_USEC=str(self.USEC)),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        sock.wait_until(lambda: len(self.pings(sock, proc.pid)) >= 3, 2.0, "3 pings")
        self.release("child")
        self.assert_succeeds(proc)
        self.assert_protocol(sock, proc.pid)
        self.assert_regular(self.pings(sock, proc.pid), started)

    def test_watchdog_pid_naming_another_process_is_not_pinged(self):
        sock = self.notify_socket()
        # A second of holding would see five pings if they were sent.
        env = self.notify_env(sock, WATCHDOG_USEC=str(self.USEC), WATCHDOG_PID="1")
        proc = self.start_lock("p", "sleep 1", env=env)
        self.assert_succeeds(proc)
        ours = self.assert_protocol(sock, proc.pid)
        self.assertTrue(any(map(is_ready, ours)), "nothing was sent at all")
        self.assertEqual(self.pings(sock, proc.pid), [])


class EnvironmentTest(NotifyTestCase):

    def test_the_child_never_sees_the_notification_variables(self):
        sock = self.notify_socket()
        cases = {"our socket": dict(NOTIFY_SOCKET=sock.address, WATCHDOG_USEC="400000"),
                 "our socket, watchdog for lock": dict(NOTIFY_SOCKET=sock.address,
                                                       WATCHDOG_USEC="400000", WATCHDOG_PID="1"),
                 "no socket": dict(WATCHDOG_USEC="400000", WATCHDOG_PID="1"),
                 "a bogus socket": dict(NOTIFY_SOCKET="x", WATCHDOG_USEC="400000")}
        for case, variables in cases.items():
            with self.subTest(case=case):
                env = dict(self.env, LOCK_E2E_MARK="kept", **variables)
                r = self.run_lock("-shell=false", "p", "env", env=env)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                names = {line.partition("=")[0] for line in r.stdout.splitlines()}
                self.assertIn("LOCK_E2E_MARK", names, "the environment is not passed at all")
                self.assertEqual(names & set(NOTIFY_VARS), set(), r.stdout)


class NoSocketTest(NotifyTestCase):

    def test_without_notify_socket_nothing_is_sent(self):
        sock = self.notify_socket()
        env = dict(self.env, WATCHDOG_USEC="400000")
        for args in ([], ["-ready=wait"]):
            with self.subTest(args=args):
                r = self.run_lock(*args, "p", "echo ran", env=env)
                self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "ran\n", ""))
        sock.sync()
        self.assertEqual([d for d in sock.datagrams() if d.pid != os.getpid()], [])

    def test_a_socket_that_cannot_be_reached_changes_nothing(self):
        regular, directory = self.path("regular"), self.path("directory")
        open(regular, "w").close()
        os.mkdir(directory)
        stream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(stream.close)
        stream.bind(self.path("stream"))
        stream.listen()
        bogus = {"a path to nothing": self.path("nothing"),
                 "a regular file": regular,
                 "a directory": directory,
                 "a stream socket": self.path("stream"),
                 "not a path": "x",
                 "empty": "",
                 "too long for sockaddr_un": self.path("n" * 120),
                 "an abstract name nobody bound": f"@lock-e2e-nobody-{uuid.uuid4().hex}"}
        for case, address in bogus.items():
            with self.subTest(case=case):
                env = dict(self.env, NOTIFY_SOCKET=address, WATCHDOG_USEC="400000")
                for flags, code in (([], 0), (["-child-exit-code"], 2), (["-preserve-status"], 3)):
                    r = self.run_lock(*flags, "p", "echo ran; exit 3", env=env)
                    self.assertEqual((r.returncode, r.stdout, r.stderr), (code, "ran\n", ""), flags)
                # -verbose may say why nothing reached systemd; the run is the same.
                r = self.run_lock("-verbose", "p", "echo ran", env=env)
                self.assertEqual((r.returncode, r.stdout), (0, "ran\n"), r.stderr)


class RealSystemdTest(NotifyTestCase):
    """The whole thing under systemd itself: a Type=notify transient unit turns active only on
    READY=1, and shows lock's status."""

    def systemctl(self, *args):
        return subprocess.run(["systemctl", *self.scope, *args], capture_output=True, text=True,
                              timeout=30 * SLOW)

    def test_a_type_notify_unit_turns_active_and_shows_the_status(self):
        if not os.path.isdir("/run/systemd/system") or not shutil.which("systemd-run"):
            self.skipTest("systemd is not running here (no /run/systemd/system or no systemd-run)")
        self.scope = [] if os.geteuid() == 0 else ["--user"]
        unit = f"lock-test-{uuid.uuid4().hex[:12]}"
        r = subprocess.run(["systemd-run", *self.scope, "--unit", unit, "-p", "Type=notify",
                            "--collect", "--no-block", os.path.abspath(LOCK),
                            "-state-dir", self.state, "p", "sleep 30"],
                           capture_output=True, text=True, timeout=30 * SLOW)
        if r.returncode != 0:
            self.skipTest(f"cannot start a transient unit here: {r.stderr.strip()}")
        self.addCleanup(self.systemctl, "stop", unit)

        def shown():
            out = self.systemctl("show", "-p", "StatusText,ActiveState", unit).stdout
            return dict(line.partition("=")[::2] for line in out.splitlines())

        def active_and_holding():
            props = shown()
            return props if props.get("ActiveState") == "active" and \
                props.get("StatusText", "").startswith("holding") else None
        props = wait_for(active_and_holding, 10, f"{unit} to turn active and say it holds")
        self.assertRegex(props["StatusText"], r"^holding p, token \d+$")
        self.assertEqual(self.systemctl("stop", unit).returncode, 0)
        self.assertNotEqual(shown().get("ActiveState"), "active")


if __name__ == "__main__":
    unittest.main()
