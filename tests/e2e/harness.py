"""Shared pieces of the end-to-end tests: run the built `lock` binary as a user would, in a private
state directory, and wait on conditions with deadlines instead of sleeping."""

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

from metrics import outcome, promtool_check, promtool_missing, read_metrics

LOCK = os.environ.get("LOCK_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "lock")

# Under the sanitizers every start is slower; bounds on behaviour scale with it.
SLOW = 3.0 if "asan" in os.path.basename(LOCK) else 1.0
# How often a local holder looks its lock file up again (src/backend/local/local_hold.cpp).
PATH_CHECK_PERIOD = 5.0

# A shell command that forks, leaves the session, forks again and closes every descriptor, as daemon(3) does, and
# ignores SIGTERM; it writes its pid to the file named after it.
DAEMONIZE = ("python3 -c 'import os, signal, sys, time\n"
             "if os.fork(): sys.exit(0)\n"
             "os.setsid()\n"
             "if os.fork(): os._exit(0)\n"
             "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
             "open(sys.argv[1] + \".tmp\", \"w\").write(str(os.getpid()) + \"\\n\")\n"
             "os.rename(sys.argv[1] + \".tmp\", sys.argv[1])\n"
             "os.closerange(0, 65536)\n"
             "while True: time.sleep(0.05)'")


def wait_for(condition, timeout=10.0, what="condition"):
    """Polls `condition` until it returns something truthy; fails the test at the deadline."""
    deadline = time.monotonic() + timeout * SLOW
    delay = 0.001
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout * SLOW:.1f}s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def free_port():
    """A TCP port on loopback that nothing listens on (for a server the test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss(pid):
    """The process's peak resident set so far, in bytes (VmHWM; it starts over at exec)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def pid_alive(pid):
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def tail(path, lines=30):
    """The last `lines` lines of a file (a server's log, for a message), or "" when unreadable."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def read_file(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def max_overlap(log_path):
    """The most children a log of "enter ID" / "exit ID" lines shows inside at once; fails on a
    malformed log."""
    inside, most = set(), 0
    for line in read_file(log_path).splitlines():
        event, who = line.split()
        if event == "enter":
            inside.add(who)
        else:
            inside.remove(who)
        most = max(most, len(inside))
    return most


def prefixes_left(state):
    """What is left in a state directory besides its fencing counter, which stays for good."""
    return sorted(f for f in os.listdir(state) if f != "@fence") if os.path.isdir(state) else []


class LockTestCase(unittest.TestCase):
    """Each test gets its own state directory and scratch directory, and every process it started
    is gone when it ends."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lock-e2e-")
        self.state = os.path.join(self.tmp, "state")
        self.env = dict(os.environ)
        self.env.update(LOCK_STATE_DIR=self.state, SHELL="/bin/sh")
        for var in ("LOCK_BACKEND", "CONSUL_HTTP_ADDR"):
            self.env.pop(var, None)
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def run_lock(self, *args, timeout=30, env=None, stdin=subprocess.DEVNULL):
        """Runs lock to completion; returns the CompletedProcess (text output)."""
        return subprocess.run([LOCK, *args], env=env or self.env, stdin=stdin, timeout=timeout * SLOW,
                              capture_output=True, text=True)

    def start_lock(self, *args, env=None, wrapper=(), **kwargs):
        """Starts lock in the background (through `wrapper`, a command that execs its arguments);
        the test's tearDown kills it if it is still running."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        p = subprocess.Popen([*wrapper, LOCK, *args], env=env or self.env, text=True, **kwargs)
        self.procs.append(p)
        return p

    def kill_later(self, pid):
        """Makes sure a process the test started indirectly is gone when the test ends (and only
        that process: its start time tells it from a later one with the same pid), stopped or
        not."""
        fields = proc_stat(pid)
        started = fields[19] if fields else None

        def kill():
            fields = proc_stat(pid)
            if fields and fields[19] == started and pid_alive(pid):
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        return
        self.addCleanup(kill)

    def wait_file(self, name, text=None, timeout=10.0):
        """Waits until the scratch file exists (and contains `text`); returns its content."""
        path = self.path(name)

        def ready():
            if not os.path.exists(path):
                return None
            content = read_file(path)
            return (content,) if text is None or text in content else None

        return wait_for(ready, timeout, f"{name} to contain {text!r}")[0]

    def finish(self, proc, timeout=20.0):
        """Waits for a background lock; returns (returncode, stdout, stderr)."""
        out, err = proc.communicate(timeout=timeout * SLOW)
        return proc.returncode, out, err

    def hold(self, *flags, prefix="p", gate="release", before=""):
        """Starts a holder whose child stays until release(gate); returns it once it holds."""
        held = self.path(f"held.{gate}")
        holder = self.start_lock(*flags, prefix, f"{before}touch {held}; "
                                 f"while [ ! -e {self.path(gate)} ]; do sleep 0.01; done")
        wait_for(lambda: os.path.exists(held) or holder.poll() is not None,
                 what="the holder's child to start")
        if holder.poll() is not None:
            self.fail(f"the holder ended early: {self.finish(holder)}")
        return holder

    def release(self, gate="release"):
        """Lets the child of hold(gate=gate) end; returns when that was."""
        with open(self.path(gate), "w"):
            pass
        return time.monotonic()

    def assert_running(self, proc):
        """Fails with what the process said, not only its exit code, if it has ended."""
        if proc.poll() is not None:
            code, out, err = self.finish(proc)
            self.fail(f"{proc.args} ended early with {code}: {out!r} {err!r}")

    def assert_succeeds(self, proc):
        code, _, err = self.finish(proc)
        self.assertEqual((code, err), (0, ""))

    def prefixes_left(self):
        return prefixes_left(self.state)

    def prefix_files(self, prefix):
        d = os.path.join(self.state, prefix.replace("/", "%2F"))
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def tickets(self, prefix="p"):
        """The waiters' queue files (q.<n>) of a local prefix."""
        return [f for f in self.prefix_files(prefix) if f.startswith("q.")]

    def ticket_of(self, pid, prefix="p"):
        """The queue file of the waiter `pid`, or None while it has none."""
        for f in self.tickets(prefix):
            try:
                if json.loads(read_file(os.path.join(self.state, prefix, f)))["pid"] == pid:
                    return f
            except ValueError:
                pass  # still being written
        return None


def lock_loop(rounds, *flags):
    """A shell loop that runs `lock [flags] $P $CHILD` `rounds` times, stopping at a failure."""
    words = " ".join(flags)
    return f'i=0; while [ $i -lt {rounds} ]; do "$LOCK" {words} "$P" "$CHILD" || exit $?; i=$((i+1)); done'


class Fleet:
    """A fleet's cron job: N contenders queued on one prefix at once, whose requests the test
    counts. Counts are the same in the sanitized build, where N processes add only time: the
    plain build runs it."""

    N = 50

    def setUp(self):
        super().setUp()
        if SLOW > 1:
            self.skipTest("counts requests, as the plain build does; 51 sanitized processes add only time")


class ThreeSlots:
    """For the server backends' semaphore tests (which give each test its own self.prefix and an
    assert_nothing_left): that three hold at once and a fourth waits, shown without a race, and
    that in a race of RACE = (contenders, rounds) no more than three ever hold (half the rounds
    under the sanitizers, whose every start is slow: as many contend all the same)."""

    RACE = (8, 10)

    def test_three_slots_never_more(self):
        contenders, rounds = self.RACE
        rounds = rounds if SLOW == 1 else (rounds + 1) // 2
        log = self.path("log")
        child = 'echo "enter $ID" >> "$LOG"; sleep 0.02; echo "exit $ID" >> "$LOG"'
        procs = [subprocess.Popen(["/bin/sh", "-c", lock_loop(rounds, "-n", "3")],
                                  stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  env=dict(self.env, LOCK=LOCK, P=self.prefix, CHILD=child, LOG=log,
                                           ID=str(n)))
                 for n in range(contenders)]
        self.procs += procs
        for n, p in enumerate(procs):
            _, err = p.communicate(timeout=240 * SLOW)
            self.assertEqual(p.returncode, 0, f"contender {n} failed: {err}")
        self.assertEqual(len(read_file(log).splitlines()), 2 * contenders * rounds)
        # How many overlap in a race depends on timing; that three can is shown below.
        self.assertLessEqual(max_overlap(log), 3)
        self.assert_nothing_left()

    def test_three_hold_at_once_and_a_fourth_waits(self):
        holders = [self.hold("-n", "3", prefix=self.prefix, gate=f"go{k}") for k in range(3)]
        r = self.run_lock("-n", "3", "-timeout", "300ms", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))
        for k, holder in enumerate(holders):
            self.release(f"go{k}")
            self.assert_succeeds(holder)
        self.assert_nothing_left()


class ArrivalOrder:
    """For the server backends' test cases (self.prefix, assert_nothing_left): waiters queued one
    after another behind a holder run in the order they came. The case gives wait_waiting(count),
    which returns once `count` waiters are in line on the server."""

    def test_waiters_are_served_in_arrival_order(self):
        holder = self.hold(prefix=self.prefix)
        order = self.path("order")
        waiters = []
        for k in range(4):
            waiters.append(self.start_lock(self.prefix, f"echo {k} >> {order}"))
            self.wait_waiting(k + 1)
        self.release()
        self.assert_succeeds(holder)
        for w in waiters:
            self.assert_succeeds(w)
        self.assertEqual(read_file(order).split(), ["0", "1", "2", "3"])
        self.assert_nothing_left()


class LimitConflicts:
    """Consul's words for a prefix used two ways, on a backend that says them as Consul does (the
    case gives self.prefix and assert_nothing_left): another limit, a lock on a semaphore's
    prefix, a semaphore on a lock's."""

    def test_limit_conflict_and_lock_semaphore_conflict(self):
        holder = self.hold("-n", "2", prefix=self.prefix)
        r = self.run_lock("-n", "3", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("semaphore limit conflict (lock: 2, local: 3)", r.stderr)
        r = self.run_lock(self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("Existing key does not match lock use", r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.release()
        self.assert_succeeds(holder)

        holder = self.hold(prefix=self.prefix, gate="release-lock")
        r = self.run_lock("-n", "2", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("Existing key does not match semaphore use", r.stderr)
        self.release("release-lock")
        self.assert_succeeds(holder)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_nothing_left()


# -watch prints at most one state in this long, the last of a burst when it ends (kCoalesce in
# src/status.cpp).
COALESCE = 0.05


def most_states(changes):
    """The most states -watch may print of a burst of `changes`, for Watch.states_until: far
    fewer (a slower build spreads a burst over more time)."""
    return int(changes / 4 * SLOW)


def assert_coalesced(case, states, seconds):
    """That `states`, what -watch printed in `seconds` of a burst, came at most one every
    COALESCE, and never one twice in a row."""
    case.assertLessEqual(len(states), seconds / COALESCE + 2, f"{len(states)} states in {seconds:.2f}s")
    case.assertTrue(all(x != y for x, y in zip(states, states[1:])), "a state printed twice in a row")


class Watch:
    """A running lock -status -watch: its lines as they come, read by a thread of their own."""

    def __init__(self, case, *args):
        self.proc = case.start_lock("-status", "-watch", *args, stdout=subprocess.PIPE)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next(self, timeout=10.0):
        """The next line, or None once the output ended; fails when none comes in time."""
        try:
            line = self.lines.get(timeout=timeout * SLOW)
        except queue.Empty:
            raise AssertionError(f"no line within {timeout * SLOW:.1f}s after {self.seen[-3:]}")
        if line is not None:
            self.seen.append(line)
        return line

    def until(self, condition, what):
        """Reads lines until one (a JSON object) meets `condition`; returns it."""
        return self.states_until(condition, what)[-1]

    def states_until(self, condition, what, most=100):
        """Reads lines (JSON objects) until one meets `condition`; returns them all, that one
        last. Fails when `most` came and none did."""
        states = []
        while len(states) < most:
            line = self.next()
            if line is None:
                raise AssertionError(f"the output ended before {what}: {self.seen[-3:]}")
            states.append(json.loads(line))
            if condition(states[-1]):
                return states
        raise AssertionError(f"{most} lines and not {what}")

    def quiet(self):
        """Whether no line is waiting to be read."""
        return self.lines.empty()

    def stop(self, sig=signal.SIGTERM):
        """Sends `sig`; returns (exit status, what is left of stdout, stderr) once lock ended."""
        send(self.proc, sig)
        code = self.proc.wait(timeout=20 * SLOW)
        rest = []
        while (line := self.next()) is not None:
            rest.append(line)
        return code, "".join(rest), self.ended()

    def ended(self):
        """What lock wrote on stderr, once it ended."""
        with self.proc.stdout, self.proc.stderr:
            return self.proc.stderr.read()


class StatusWatch:
    """-status -watch on a server backend. The case gives self.prefix; proxy(), a context that
    gives a FaultProxy in front of its server, a function that lists the requests lock sent
    through it, and the flags that send lock through it; and BUDGET, flags that make the retry budget short, with
    its length in seconds (LeaseTiming::stop_after: 0.9 TTL less -kill-after)."""

    BUDGET = (("-session-ttl", "3s", "-kill-after", "1s"), 1.7)
    # How -status shows a holder that stored -value: where the value replaces the holder's record
    # (Consul's and etcd's keys, ZooKeeper's nodes), by the value alone.
    VALUE_HOLDER = r"a holder known by the value it stored"
    # How long a hold goes between renewals with the default flags, which is as long as the watch
    # lets its server be quiet before it asks it something (LeaseTiming::plan).
    RENEW = 0.5

    def test_every_change_is_shown_as_it_comes(self):
        watch = Watch(self, "-json", self.prefix)
        first = watch.until(lambda o: True, "the first status")
        self.assertEqual((first["prefix"], first["held"], first["holders"]), (self.prefix, False, []))
        holder = self.hold("-n", "2", "-name", "first", prefix=self.prefix, gate="a")
        held = watch.until(lambda o: [h["name"] for h in o["holders"]] == ["first"], "the holder")
        self.assertEqual((held["held"], held["limit"], held["holders"][0]["pid"]), (True, 2, holder.pid))
        second = self.hold("-n", "2", prefix=self.prefix, gate="b")
        waiter = self.start_lock("-n", "2", "-name", "third", self.prefix, "true")
        out = watch.until(lambda o: len(o["holders"]) == 2 and o["waiters"]
                          and o["waiters"][0]["name"] == "third", "the waiter")
        self.assertEqual(out["waiters"][0]["pid"], waiter.pid)
        self.release("a")
        self.assert_succeeds(holder)
        self.release("b")
        self.assert_succeeds(second)
        self.assert_succeeds(waiter)
        watch.until(lambda o: o["limit"] == 0, "the prefix let go")
        self.assertEqual(watch.stop(signal.SIGINT), (0, "", ""))
        objects = [json.loads(line) for line in watch.seen]
        self.assertTrue(all(x != y for x, y in zip(objects, objects[1:])), watch.seen)

    def test_the_holders_value_is_shown(self):
        """-value is what a leader tells its standbys and clients (an address): the watch
        shows it, as -status does."""
        watch = Watch(self, "-json", self.prefix)
        watch.until(lambda o: not o["held"], "the first status")
        holder = self.hold("-value", "http://10.0.0.5:8080", prefix=self.prefix)
        out = watch.until(lambda o: o["held"], "the holder")
        self.assertEqual(out["holders"][0]["value"], "http://10.0.0.5:8080")
        self.assertRegex(self.run_lock("-status", self.prefix).stdout,
                         rf"\n  holder: {self.VALUE_HOLDER}, name '[^\n]+', "
                         r"value 'http://10\.0\.0\.5:8080', fencing token \d+\n")
        self.release()
        self.assert_succeeds(holder)
        watch.until(lambda o: o["limit"] == 0, "the holder gone")
        self.assertEqual(watch.stop(), (0, "", ""))

    def test_a_quiet_prefix_costs_no_more_than_a_holds_renewals(self):
        """Another prefix's comings and goings show nothing; then 5 s with nothing happening
        cost at most a request per renewal period, as a hold's renewals do: the watch waits on
        the server's news, and asks only whether the server is still there."""
        with self.proxy() as (proxy, requests, via):
            watch = Watch(self, *via, self.prefix)
            self.assertEqual(watch.next(), f"prefix '{self.prefix}': not held\n")
            other = self.prefix + "-other"
            self.assertEqual(self.run_lock(other, "true").returncode, 0)
            before = len(requests())
            time.sleep(5)  # time passing, with nothing happening, is what is under test
            quiet = requests()[before:]
            self.assertLessEqual(len(quiet), 5 / self.RENEW + 2, quiet)
            self.assertTrue(watch.quiet(), watch.seen)
            holder = self.hold(prefix=self.prefix)
            self.assertRegex(watch.next(), rf"^prefix '{self.prefix}': held \(lock\)\n")
            self.assertRegex(watch.next(), rf"^  holder: pid {holder.pid} on ")
            self.release()
            self.assert_succeeds(holder)
            self.assertEqual(watch.next(), f"prefix '{self.prefix}': not held\n")
            self.assertEqual(watch.stop(), (0, "", ""))

    def test_a_cut_within_the_budget_is_ridden_out_and_hides_no_change(self):
        """Connections reset for a second, while the prefix is taken: the watch goes on, and
        shows the holder once it hears from the server again."""
        with self.proxy() as (proxy, requests, via):
            watch = Watch(self, "-json", *via, self.prefix)
            watch.until(lambda o: not o["held"], "the first status")
            proxy.set_mode("reset")
            holder = self.hold("-name", "during", prefix=self.prefix)
            time.sleep(1)  # the cut's length is what is under test
            proxy.set_mode("pass")
            watch.until(lambda o: [h["name"] for h in o["holders"]] == ["during"], "the holder")
            self.release()
            self.assert_succeeds(holder)
            watch.until(lambda o: o["limit"] == 0, "the holder gone")
            self.assertEqual(watch.stop(), (0, "", ""))

    def test_a_cut_longer_than_the_budget_ends_the_watch(self):
        flags, budget = self.BUDGET
        with self.proxy() as (proxy, requests, via):
            watch = Watch(self, *flags, *via, self.prefix)
            watch.next()
            cut = time.monotonic()
            proxy.set_mode("reset")
            code = watch.proc.wait(timeout=30 * SLOW)
            took = time.monotonic() - cut
            err = watch.ended()
            self.assertEqual(code, 1, err)
            self.assertRegex(err, rf"^lock: stopped watching prefix '{self.prefix}': no answer for \d+ ms")
            self.assertGreaterEqual(took, budget)
            self.assertLess(took, budget + 8 * SLOW)


class OperatorFlags:
    """-conflict-exit-code, -lost-exit-code and -min-hold on a backend. The case gives
    self.prefix; lose(), which takes the one hold on it away from outside, as an operator or a
    server could; and LOSS_BOUND, the seconds within which a holder hears of that."""

    LOSS_BOUND = 1.0
    BACKEND = "local"  # as -metrics-file labels the case's runs
    UNTIL = r"held until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(-min-hold\)"

    def metrics(self):
        """What the runs' -metrics-file (job.prom in the scratch directory) says, once promtool
        had nothing to say against it, and no temporary file is left beside it."""
        if promtool_missing():
            self.skipTest(promtool_missing())
        self.assertEqual(promtool_check(self.path("job.prom")), "")
        self.assertEqual([f for f in os.listdir(self.tmp) if f.startswith("job.prom")], ["job.prom"])
        return read_metrics(self.path("job.prom"), self.prefix, self.BACKEND)

    def wait_min_hold(self, holder):
        """Waits until -status shows the holder in its extra hold, its child gone."""
        def shown():
            self.assert_running(holder)
            return "(-min-hold)" in self.run_lock("-status", self.prefix).stdout
        wait_for(shown, 10, "-status to show the extra hold")

    def lose_and_finish(self, holder):
        """Takes the hold of `holder` (started with -lost-exit-code 9) away; returns once it has
        exited 9, saying it lost the lock."""
        self.lose()
        code, _, err = self.finish(holder, self.LOSS_BOUND + 10)
        self.assertEqual(code, 9, err)
        self.assertIn("lock: lock lost: ", err)

    def test_a_run_that_times_out_exits_with_the_conflict_code(self):
        holder = self.hold(prefix=self.prefix)
        r = self.run_lock("-timeout", "300ms", "-conflict-exit-code", "75", self.prefix,
                          "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertRegex(r.stderr, r"^lock: timed out waiting for prefix [^\n]*\n\Z")
        self.assertFalse(os.path.exists(self.path("ran")))
        self.release()
        self.assert_succeeds(holder)

    def test_a_lost_lock_exits_with_the_lost_code(self):
        holder = self.start_lock("-lost-exit-code", "9", "-kill-after", "1s", self.prefix,
                                 f"touch {self.path('held')}; while :; do sleep 0.01; done")
        wait_for(lambda: os.path.exists(self.path("held")) or holder.poll() is not None,
                 what="the child to start")
        self.assert_running(holder)
        self.lose_and_finish(holder)

    def test_min_hold_keeps_the_lock_after_a_short_child(self):
        started = time.monotonic()
        holder = self.start_lock("-min-hold", "5s", self.prefix, "touch " + self.path("ran"))
        self.wait_min_hold(holder)
        self.assertTrue(os.path.exists(self.path("ran")))
        r = self.run_lock("-timeout", "200ms", self.prefix, "touch " + self.path("second"))
        if time.monotonic() - started < 4.5:  # asked well within the hold: refused
            self.assertEqual(r.returncode, 1, r.stderr)
        code, _, err = self.finish(holder, 5 + 10)
        self.assertEqual((code, err), (0, ""))
        self.assertGreaterEqual(time.monotonic() - started, 5.0)
        self.assertFalse(os.path.exists(self.path("second")))

    def test_a_stop_signal_ends_min_hold_at_once(self):
        holder = self.start_lock("-min-hold", "60s", self.prefix, "true")
        self.wait_min_hold(holder)
        # The status is read here, where the hold cannot end before it is (however slow the build).
        self.assertRegex(self.run_lock("-status", self.prefix).stdout, self.UNTIL)
        until = json.loads(self.run_lock("-status", "-json", self.prefix).stdout)["holders"][0]["until"]
        self.assertRegex(until, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        sent = time.monotonic()
        holder.send_signal(signal.SIGTERM)
        code, _, err = self.finish(holder, 10)
        self.assertEqual((code, err), (0, ""))
        self.assertLess(time.monotonic() - sent, 2 * SLOW)
        r = self.run_lock("-timeout", "2s", self.prefix, "true")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_loss_ends_min_hold(self):
        holder = self.start_lock("-min-hold", "60s", "-lost-exit-code", "9", self.prefix, "true")
        self.wait_min_hold(holder)
        self.lose_and_finish(holder)

    def test_the_metrics_file_tells_each_outcome_and_keeps_the_last_success(self):
        prom = self.path("job.prom")
        r = self.run_lock("-metrics-file", prom, self.prefix, "exit 3")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        m = self.metrics()
        self.assertEqual((outcome(m), m["lock_run_child_exit_status"], m["lock_last_success_timestamp_seconds"]),
                         ("ran", 3, 0))
        self.assertLessEqual(m["lock_run_start_timestamp_seconds"], m["lock_run_end_timestamp_seconds"])
        before = time.time()
        self.assertEqual(self.run_lock("-metrics-file", prom, self.prefix, "true").returncode, 0)
        m = self.metrics()
        success = m["lock_last_success_timestamp_seconds"]
        self.assertEqual((outcome(m), success), ("ran", m["lock_run_end_timestamp_seconds"]))
        self.assertGreater(success, before - 1)
        # Skipped: the last success stays, and no child ran.
        holder = self.hold(prefix=self.prefix)
        r = self.run_lock("-timeout", "200ms", "-conflict-exit-code", "75", "-metrics-file", prom,
                          self.prefix, "true")
        self.assertEqual(r.returncode, 75, r.stderr)
        m = self.metrics()
        self.assertEqual((outcome(m), m["lock_last_success_timestamp_seconds"], m["lock_run_held_seconds"]),
                         ("conflict", success, 0))
        self.assertNotIn("lock_run_child_exit_status", m)
        self.assertGreaterEqual(m["lock_run_wait_seconds"], 0.2)
        self.release()
        self.assert_succeeds(holder)

    def test_the_metrics_file_while_the_lock_is_held_and_once_it_is_lost(self):
        holder = self.hold("-metrics-file", self.path("job.prom"), "-lost-exit-code", "9", prefix=self.prefix)
        m = self.metrics()  # written before the child started
        self.assertEqual(outcome(m), "running")
        self.assertNotIn("lock_run_end_timestamp_seconds", m)
        self.assertNotIn("lock_run_child_exit_status", m)
        self.lose_and_finish(holder)
        m = self.metrics()
        self.assertEqual((outcome(m), m["lock_run_child_exit_status"]), ("lost", 128 + signal.SIGTERM))
        self.assertGreater(m["lock_run_held_seconds"], 0)


def send(proc, sig):
    os.kill(proc.pid, sig)


__all__ = ["DAEMONIZE", "LOCK", "SLOW", "LockTestCase", "wait_for", "peak_rss", "pid_alive", "read_file", "send", "signal",
           "prefixes_left"]


def proc_stat(pid):
    """The fields of /proc/<pid>/stat after the command name ([0] state, [1] ppid, [2] process
    group, [3] session, [19] start time), or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def group_members(pgid):
    """Pids of the live (not zombie) processes in process group `pgid`."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = proc_stat(entry)
            if fields and fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry))
    return sorted(members)


def all_children_of(pid):
    """Pids of the direct children of a process, of all its threads (empty once it is gone)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return sorted(out)


def children_of(pid):
    """Pids of the direct children of a process (empty once it is gone), leaving out lock's
    watchdog: a child of lock with lock's own command line, but never part of the child's tree."""
    return [c for c in all_children_of(pid) if read_comm(c) != "lock-watchdog"]


def watchdogs_of(pid):
    """Pids of lock's children that have named themselves lock-watchdog (just after their fork)."""
    return [c for c in all_children_of(pid) if read_comm(c) == "lock-watchdog"]


def tree_children_of(pid):
    """Pids of the direct children of lock's watchdog, which starts lock's child and adopts
    what the child's tree orphans: the child, and the processes that escaped it."""
    return [c for w in watchdogs_of(pid) for c in all_children_of(w)]


def watchdogs_with(env_entry):
    """Pids of every lock-watchdog on the machine whose environment holds `env_entry` ("K=V"):
    how to find one that is nobody's child (started by a double fork where /proc is hidden)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and read_comm(entry) == "lock-watchdog":
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if env_entry.encode() in f.read().split(b"\0"):
                        found.append(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return found


def read_comm(pid):
    """A process's name (/proc/PID/comm), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().rstrip("\n")
    except (FileNotFoundError, ProcessLookupError):
        return None


__all__ += ["proc_stat", "group_members", "all_children_of", "children_of", "watchdogs_of",
            "tree_children_of", "watchdogs_with", "read_comm"]
