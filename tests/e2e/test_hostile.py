"""lock attacked as another user or a hostile peer would: FIFOs, huge sparse files and garbage in
a shared state directory next to a holder (a second user at every step of another's run is
test_hostile_users); a FIFO, a link, a planted temporary name and a last success from the future
where -metrics-file writes; terminal escapes in every field a peer controls, on every backend,
through every output; a fencing counter pushed to the end of its range; and a child that kills
lock's watchdog before lock itself is killed. Whatever they do, every run ends within the bounds
README promises, says in one line why when it cannot go on, deletes nothing of theirs, lets no
control character through to a terminal or a log, and never lets two children overlap."""

import base64
import errno
import json
import os
import select
import signal
import stat
import subprocess
import time
import tty
import unittest
import uuid

from etcd_server import EtcdTestCase
from harness import DAEMONIZE, LOCK, SLOW, LockTestCase, pid_alive, read_file, wait_for
from metrics import outcome, read_metrics
from notify_socket import NotifySocket
from test_consul import ConsulTestCase
from zookeeper_server import ZooKeeperServer, missing as zookeeper_missing


ZOOKEEPER_MISSING = zookeeper_missing()

# A sparse file this large costs no disk, but a buffer sized from it cannot be allocated.
HUGE = 64 << 30

# What a peer writes where lock shows it: an OSC that sets the window title, a screen clear, a
# colour, a carriage return and a backspace that hide what came before, a C1 CSI (some terminals
# obey it as they do ESC [) and a DEL.
HOSTILE_NAME = "name\x1b]0;PWNED\x07\x1b[2J\x1b[31m\r\x08\x9b2J\x7f"
HOSTILE_HOST = "host\x1b]0;PWNED\x07\x1b[5m\x9b1m"
HOSTILE_SINCE = "since\x1b[8m\x07\r"
HOLDER_FIELDS = {"name": HOSTILE_NAME, "host": HOSTILE_HOST, "since": HOSTILE_SINCE}
# Not JSON, and not UTF-8 either: a lone 0x9b, which an 8-bit terminal takes for CSI.
HOSTILE_BYTES = b"raw\x1b]0;PWNED\x07\x1b[2J\x9b2J\x00\xff"


def hostile_record(prefix, limit=None, pid=4242, token=7):
    """A holder record as lock writes one, every text field of it full of escapes."""
    record = dict(HOLDER_FIELDS, prefix=prefix, pid=pid, token=token)
    if limit is not None:
        record["limit"] = limit  # ZooKeeper's nodes carry it
    return json.dumps(record)


def escaped(text):
    """`text` (str or bytes) as lock's messages show it (util/printable): controls, C1 included,
    as \\xNN of each of their bytes, bytes that are not UTF-8 as \\xNN, backslashes doubled."""
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    out = []
    for ch in data.decode("utf-8", "surrogateescape"):
        code = ord(ch)
        if ch in "\n\r\t\\":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}[ch])
        elif 0x20 <= code < 0x7f or (code >= 0xa0 and not 0xdc80 <= code <= 0xdcff):
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape"))
    return "".join(out)


def raw_controls(data):
    """The control characters in `data` (bytes) that a terminal would obey: C0 but newline, DEL,
    and C1, whether as UTF-8 or as a lone byte 0x80 to 0x9f."""
    text = data.decode("utf-8", "surrogateescape")
    return [ch for ch in text if (ord(ch) < 0x20 and ch != "\n") or 0x7f <= ord(ch) <= 0x9f
            or 0xdc80 <= ord(ch) <= 0xdc9f]


def wait_until(condition, timeout):
    """True once `condition` holds, False if it does not within `timeout` seconds (times SLOW):
    for the checks that note a failure and go on to the next case."""
    try:
        wait_for(condition, timeout)
        return True
    except AssertionError:
        return False


class HostileCase(LockTestCase):
    """How every test here runs lock, each wait bounded, and what it checks of what lock said."""

    def setUp(self):
        super().setUp()
        # The suite itself may run under systemd: lock must see only the socket a test gives.
        for var in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
            self.env.pop(var, None)

    def run_bounded(self, args, bound):
        """Runs lock to its end, failing the test (and killing it) if it still runs after `bound`
        seconds (times SLOW). Returns (code, stdout bytes, stderr bytes)."""
        p = subprocess.Popen([LOCK, *args], env=self.env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(p)
        return self.finish_bounded(p, bound)

    def finish_bounded(self, proc, bound):
        """Waits at most `bound` seconds (times SLOW) for a lock started in the background;
        returns (code, stdout, stderr), as text or bytes as the process was opened."""
        try:
            out, err = proc.communicate(timeout=bound * SLOW)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            self.fail(f"lock (pid {proc.pid}) still ran after {bound * SLOW:.1f}s "
                      f"(stderr so far: {err!r})")
        return proc.returncode, out, err

    def assert_no_raw_controls(self, data, where):
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        self.assertEqual(raw_controls(data), [], f"{where} let control characters through: {data!r}")

    def assert_one_line(self, err, where):
        """A run that cannot go on says why in one line of its own, and crashes on nothing."""
        if isinstance(err, bytes):
            err = err.decode("utf-8", "surrogateescape")
        self.assertNotIn("bad_alloc", err, where)
        self.assertRegex(err, r"^lock: [^\n]+\n$", f"{where}: not one line of lock's")
        self.assert_no_raw_controls(err, where)


# ---- the local backend, in a state directory others can write to --------------------------------


class SharedStateDirTest(HostileCase):
    """A state directory others can write to (-state-dir, mode 1777). What they could put there
    is put by hand, as root, next to a holder."""

    def setUp(self):
        super().setUp()
        os.mkdir(self.state)
        os.chmod(self.state, 0o1777)

    def prefix_dir(self):
        return os.path.join(self.state, "p")

    def regular_tickets(self):
        """The waiters' tickets that are files (reading a FIFO planted among them would block the
        test itself)."""
        return [name for name in os.listdir(self.prefix_dir()) if name.startswith("q.")
                and stat.S_ISREG(os.lstat(os.path.join(self.prefix_dir(), name)).st_mode)]

    def pid_in(self, ticket):
        """The pid a ticket's record names, or None while it is being written."""
        try:
            return json.loads(read_file(os.path.join(self.prefix_dir(), ticket)))["pid"]
        except (ValueError, KeyError):
            return None

    def test_a_fifo_among_the_tickets_holds_up_no_one(self):
        holder = self.hold()
        # Number 0, ahead of every ticket lock hands out: each waiter looks at it first.
        fifo = os.path.join(self.prefix_dir(), "q.00000000000000000000")
        os.mkfifo(fifo)
        planted = os.lstat(fifo)

        code, _, err = self.run_bounded(["-timeout", "1s", "p", "touch " + self.path("ran")], 1 + 2)
        self.assertEqual(code, 1, err)
        self.assertIn(b"timed out", err)
        self.assert_one_line(err, "the waiter that timed out")
        self.assertFalse(os.path.exists(self.path("ran")), "ran while the holder held")

        waiter = self.start_lock("p", "touch " + self.path("ran"))
        wait_for(lambda: self.regular_tickets() or waiter.poll() is not None,
                 what="the waiter to queue")
        os.kill(waiter.pid, signal.SIGTERM)
        stopped = time.monotonic()
        code, _, err = self.finish_bounded(waiter, 1)
        self.assertEqual(code, 1, err)
        self.assertLess(time.monotonic() - stopped, 1 * SLOW)
        self.assertFalse(os.path.exists(self.path("ran")))

        code, out, err = self.run_bounded(["-status", "p"], 3)
        self.assertEqual((code, err), (0, b""))
        self.assertIn(f"holder: pid {holder.pid} ".encode(), out)

        self.release()
        code, _, err = self.finish_bounded(holder, 3)
        self.assertEqual((code, err), (0, ""))
        after = os.lstat(fifo)
        self.assertTrue(stat.S_ISFIFO(after.st_mode))
        self.assertEqual(after.st_ino, planted.st_ino, "the FIFO was replaced")

    def test_a_huge_sparse_record_or_garbage_is_a_holder_whose_record_cannot_be_read(self):
        first = self.hold("-n", "2", gate="first", before=f"echo $LOCK_KEY > {self.path('key.first')}; ")
        second = self.hold("-n", "2", gate="second",
                           before=f"echo $LOCK_KEY > {self.path('key.second')}; ")
        huge = read_file(self.path("key.first")).strip()
        garbage = read_file(self.path("key.second")).strip()
        os.truncate(huge, HUGE)
        # In place, the holder's own file: its path check has nothing to notice.
        with open(garbage, "r+b") as f:
            f.write(b"\x1b]0;PWNED\x07{\"pid\": \xff not a record" + b"\x1b[2J" * 64)
            f.truncate()
        unreadable = "a holder with no record of lock's"

        code, out, err = self.run_bounded(["-status", "p"], 5)
        self.assertNotIn(b"bad_alloc", err)
        self.assertEqual((code, err), (0, b""))
        self.assert_no_raw_controls(out, "-status")
        self.assertEqual(out.decode().count(f"holder: {unreadable}"), 2, out)

        code, out, err = self.run_bounded(["-status", "-json", "p"], 5)
        self.assertNotIn(b"bad_alloc", err)
        self.assertEqual((code, err), (0, b""))
        self.assertEqual([(h["pid"], h["host"]) for h in json.loads(out)["holders"]], [(0, "")] * 2)

        code, _, err = self.run_bounded(["-n", "2", "-verbose", "-timeout", "300ms", "p", "true"], 5)
        self.assertNotIn(b"bad_alloc", err)
        self.assertEqual(code, 1, err)
        self.assertIn(f"timed out waiting for prefix 'p'; held by {unreadable}".encode(), err)
        self.assert_no_raw_controls(err, "a waiter's stderr")

        # A waiter queues, its ticket grows huge too, and then it takes the huge slot file.
        waiter = self.start_lock("-n", "2", "p", f"echo $LOCK_KEY > {self.path('key.waiter')}")
        # Once its record is written: lock empties a record file that grew before it wrote.
        ticket = wait_for(lambda: [t for t in self.regular_tickets() if self.pid_in(t) == waiter.pid],
                          what="the waiter to queue")[0]
        os.truncate(os.path.join(self.prefix_dir(), ticket), HUGE)
        code, out, err = self.run_bounded(["-status", "p"], 5)
        self.assertEqual((code, err), (0, b""))
        self.assertIn(f"waiting: {unreadable}".encode(), out)

        self.release("first")
        code, _, err = self.finish_bounded(first, 5)
        self.assertEqual((code, err), (0, ""))
        code, _, err = self.finish_bounded(waiter, 5)
        self.assertNotIn("bad_alloc", err)
        self.assertEqual((code, err), (0, ""))
        self.assertEqual(read_file(self.path("key.waiter")).strip(), huge)
        self.release("second")
        code, _, err = self.finish_bounded(second, 5)
        self.assertEqual((code, err), (0, ""))
        self.assertEqual(self.prefixes_left(), [])

    def test_a_fencing_counter_pushed_to_its_end_never_makes_a_token_go_back(self):
        # Whoever can write to the state directory can write its counter. One step short of the
        # end of its range, the next token is the last there is: a run after it must fail, not
        # wrap around to a token lower than one already handed out.
        with open(os.path.join(self.state, "@fence"), "w") as f:
            f.write(f"{2 ** 64 - 2:20d}\n")
        tokens = []
        for _ in range(3):
            code, out, err = self.run_bounded(["p", "echo $LOCK_FENCING_TOKEN"], 5)
            if code == 0:
                tokens.append(int(out))
            else:
                self.assertEqual(code, 1, err)
                self.assert_one_line(err, "a run that found no token left")
        self.assertTrue(tokens, "no run took a token")
        for earlier, later in zip(tokens, tokens[1:]):
            self.assertLess(earlier, later, f"tokens handed out in turn: {tokens}")


class MetricsFileTest(HostileCase):
    """-metrics-file's path in a directory others can write to, as node_exporter's textfile
    directory may be: what they put at the path or beside it hangs no run, is read or written
    through by none, and cannot keep the alert on the last success quiet."""

    SERIES = 'lock_last_success_timestamp_seconds{prefix="p",backend="local"}'

    def setUp(self):
        super().setUp()
        self.prom = self.path("job.prom")

    def metrics(self):
        self.assertFalse(os.path.islink(self.prom))
        return read_metrics(self.prom, "p", "local")

    def warning(self, why):
        return f"lock: warning: -metrics-file: {self.prom} {why}\n"

    def not_regular(self):
        return self.warning("is not a regular file (a link, FIFO or socket); "
                            "no last success carried over")

    def test_a_fifo_at_the_path_hangs_no_run_and_is_replaced(self):
        os.mkfifo(self.prom)
        holder = self.hold("-metrics-file", self.prom)
        self.assertEqual(outcome(self.metrics()), "running")
        os.kill(holder.pid, signal.SIGTERM)
        code, _, err = self.finish_bounded(holder, 3)
        self.assertEqual((code, err), (0, self.not_regular()))
        m = self.metrics()
        self.assertEqual((outcome(m), m["lock_last_success_timestamp_seconds"]), ("interrupted", 0))

    def test_a_fifo_put_at_the_path_while_lock_holds_hangs_no_exit(self):
        holder = self.hold("-metrics-file", self.prom)
        self.assertEqual(outcome(self.metrics()), "running")
        os.unlink(self.prom)
        os.mkfifo(self.prom)
        self.release()
        code, _, err = self.finish_bounded(holder, 3)
        self.assertEqual((code, err), (0, self.not_regular()))
        m = self.metrics()
        self.assertEqual((outcome(m), m["lock_last_success_timestamp_seconds"]),
                         ("ran", m["lock_run_end_timestamp_seconds"]))

    def test_a_link_at_the_path_is_neither_read_nor_written_through(self):
        # What the link points to is readable by lock's user, not by whoever planted the link.
        secret = self.path("secret")
        text = f"{self.SERIES} 1234567.000\n"
        with open(secret, "w") as f:
            f.write(text)
        os.chmod(secret, 0o600)
        os.symlink(secret, self.prom)
        code, _, err = self.run_bounded(["-metrics-file", self.prom, "p", "exit 3"], 5)
        m = self.metrics()
        self.assertEqual((outcome(m), m["lock_run_child_exit_status"]), ("ran", 3))
        self.assertEqual(m["lock_last_success_timestamp_seconds"], 0)
        self.assertEqual(read_file(secret), text)
        self.assertEqual((code, err.decode()), (0, self.not_regular()))

    def test_a_device_or_a_directory_at_the_path_is_left_as_it_is(self):
        try:
            os.mknod(self.path("null"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            self.skipTest("making a device takes root")
        os.mkdir(self.path("dir"))
        for name in ("null", "dir"):
            with self.subTest(name=name):
                self.prom = self.path(name)
                before = os.lstat(self.prom)
                code, _, err = self.run_bounded(["-metrics-file", self.prom, "p", "true"], 5)
                after = os.lstat(self.prom)
                self.assertEqual((after.st_mode, after.st_ino), (before.st_mode, before.st_ino))
                self.assertEqual([f for f in os.listdir(self.tmp) if f.startswith(name + ".")], [])
                self.assertEqual((code, err.decode()),
                                 (0, 2 * self.warning("is a directory or a device; left as it is")))

    def test_the_temporary_file_is_not_named_after_the_pid(self):
        # Planted under the name lock would use if it named its temporary file after its pid,
        # which is known while it waits: a link to a file of someone else's.
        holder = self.hold()
        waiter = self.start_lock("-metrics-file", self.prom, "p", "true")
        wait_for(lambda: self.ticket_of(waiter.pid) or waiter.poll() is not None,
                 what="the waiter to queue")
        victim = self.path("victim")
        with open(victim, "w") as f:
            f.write("theirs\n")
        planted = f"{self.prom}.{waiter.pid}.tmp"
        os.symlink(victim, planted)
        self.release()
        code, _, err = self.finish_bounded(waiter, 5)
        self.assertEqual((code, err), (0, ""))
        self.assertEqual(outcome(self.metrics()), "ran")
        self.assertEqual((os.readlink(planted), read_file(victim)), (victim, "theirs\n"))
        code, _, err = self.finish_bounded(holder, 5)
        self.assertEqual((code, err), (0, ""))

    def test_a_last_success_from_the_future_is_not_carried_over(self):
        for value, carried in (("1234567.000", 1234567), ("1e300", 0), ("9e18", 0)):
            with self.subTest(value=value):
                with open(self.prom, "w") as f:
                    f.write(f"{self.SERIES} {value}\n")
                code, _, err = self.run_bounded(["-metrics-file", self.prom, "p", "exit 3"], 5)
                self.assertEqual((code, err), (0, b""))
                self.assertEqual(self.metrics()["lock_last_success_timestamp_seconds"], carried)


class KilledWatchdogTest(HostileCase):

    def read_line(self, stream, bound):
        """One line from a pipe, or what came before it ended or `bound` seconds passed."""
        deadline = time.monotonic() + bound * SLOW
        data = b""
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stream], [], [], left)[0]:
                break
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                break
            data += chunk
        return data.decode()

    # What an attacker's child runs: it kills whatever process named lock-watchdog is its parent
    # or its parent's child, as a child of any build of lock can find it, through /proc alone.
    KILL_WATCHDOG = ("for p in $PPID $(cat /proc/$PPID/task/*/children); do "
                     "[ \"$(cat /proc/$p/comm)\" = lock-watchdog ] && kill -KILL $p; done")

    def test_a_child_that_kills_its_watchdog_and_then_a_killed_lock_leave_nothing_running(self):
        # The daemon holds no descriptor of the lock's: once the watchdog is gone, only lock can
        # find it, and lock is killed the moment it has said why it stops.
        daemon, child = self.path("daemon"), self.path("child")
        holder = self.start_lock("p", f"{DAEMONIZE} {daemon}; echo $$ > {child}; "
                                      f"while [ ! -e {self.path('go')} ]; do sleep 0.01; done; "
                                      f"{self.KILL_WATCHDOG}; sleep 1000")
        daemon_pid = int(self.wait_file("daemon", "\n"))
        child_pid = int(self.wait_file("child", "\n"))
        self.kill_later(daemon_pid)
        self.kill_later(child_pid)
        # The next holder says whether anything of the first tree still ran when its child began.
        second = self.start_lock("p", f"for pid in {daemon_pid} {child_pid}; do "
                                      "if kill -0 $pid 2>/dev/null; then echo alive; "
                                      "else echo dead; fi; done")
        wait_for(lambda: any(f.startswith("q.") for f in self.prefix_files("p")) or
                 second.poll() is not None, what="the second holder to queue")
        self.assertIsNone(second.poll(), "the second holder did not wait")

        self.release("go")
        said = self.read_line(holder.stderr, 5)
        holder.kill()
        holder.wait(timeout=10 * SLOW)
        self.assertTrue(wait_until(lambda: not pid_alive(daemon_pid) and not pid_alive(child_pid), 2),
                        f"the first tree outlived its lock, which said {said!r}")
        rest = holder.stderr.read()  # at its end: nothing of the tree holds the pipe any more
        self.assertRegex(said, r"^lock: lock's watchdog \(pid \d+\) was killed by SIGKILL; [^\n]*\n$")
        self.assertEqual(rest, "", "more than one line")
        code, out, err = self.finish_bounded(second, 10)
        self.assertEqual((code, out, err), (0, "dead\ndead\n", ""))
        self.assertEqual(self.prefixes_left(), [])


# ---- escapes from peers, on every backend, through every output --------------------------------


class EveryOutput:
    """For a test case whose backend has a hostile holder on self.prefix: what lock shows of it
    through -status, -status -json, and a waiter's -verbose, its "still waiting" notice on a
    terminal, its messages and systemd's STATUS."""

    def status_outputs(self):
        code, out, err = self.run_bounded(["-status", self.prefix], 20)
        self.assertEqual((code, err), (0, b""), out)
        code, json_out, err = self.run_bounded(["-status", "-json", self.prefix], 20)
        self.assertEqual((code, err), (0, b""), json_out)
        return out, json_out

    def watch_a_waiter(self):
        """Runs `lock -verbose -timeout 4s` behind the holder with a terminal as its stderr (a
        pty, raw, so that the bytes come as lock wrote them) and a notification socket: long
        enough for the notice (3 s) and a few status lines. Returns (code, stderr bytes, the
        datagrams it sent)."""
        sock = NotifySocket(self)
        master, slave = os.openpty()
        tty.setraw(slave)
        try:
            p = subprocess.Popen([LOCK, "-verbose", "-timeout", "4s", self.prefix,
                                  "touch " + self.path("ran")],
                                 env=dict(self.env, NOTIFY_SOCKET=sock.address),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
            self.procs.append(p)
        finally:
            os.close(slave)
        data = b""
        bound = 4 + 20 * SLOW
        deadline = time.monotonic() + bound
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    p.kill()
                    self.fail(f"the waiter still ran after {bound:.1f}s: {data!r}")
                if not select.select([master], [], [], left)[0]:
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError as e:
                    if e.errno == errno.EIO:  # no end of the terminal is open: lock has exited
                        break
                    raise
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(master)
        p.wait(timeout=10 * SLOW)
        sock.sync()
        self.assertFalse(os.path.exists(self.path("ran")), "the child ran behind a holder")
        return p.returncode, data, sock.datagrams(p.pid)

    def check_waiter(self, shown):
        """`shown`: what of the holder's record the notice and the status lines name (escaped)."""
        code, err, datagrams = self.watch_a_waiter()
        text = err.decode("utf-8", "surrogateescape")
        with self.subTest(output="a waiter's stderr (-verbose, notice, messages)"):
            self.assertEqual(code, 1, text)
            self.assertNotIn("bad_alloc", text)
            self.assert_no_raw_controls(err, "the waiter's stderr")
            self.assertRegex(text, r"(?m)^lock: timed out waiting for prefix '[^\n]*'[^\n]*\n\Z")
        with self.subTest(output="the still-waiting notice"):
            notice = [line for line in text.splitlines() if line.startswith("lock: still waiting")]
            self.assertEqual(len(notice), 1, text)
            for what in shown:
                self.assertIn(escaped(what), notice[0])
        with self.subTest(output="systemd's STATUS"):
            for d in datagrams:
                self.assert_no_raw_controls(d.raw, f"the datagram {d}")
            statuses = [d.get("STATUS") for d in datagrams if d.get("STATUS") is not None]
            behind = [s for s in statuses if " held: " in s]
            self.assertTrue(behind, statuses)
            for what in shown:
                self.assertIn(escaped(what), behind[-1])

    def check_status_text(self, out, shown):
        """-status names each of `shown` escaped once, never twice."""
        with self.subTest(output="-status"):
            text = out.decode("utf-8", "surrogateescape")
            self.assert_no_raw_controls(out, "-status")
            for what in shown:
                self.assertIn(escaped(what), text)
            self.assertNotIn("\\\\x", text, "escaped twice")

    def check_status_json(self, out, holders, waiters=()):
        """-status -json gives each record's fields as the peer wrote them: `holders` and
        `waiters` are lists of {field: value}, each a part of what the record must say."""
        with self.subTest(output="-status -json, its values"):
            got = json.loads(out)
            for kind, expected in (("holders", holders), ("waiters", waiters)):
                self.assertEqual(len(got[kind]), len(expected), got)
                for record, fields in zip(got[kind], expected):
                    self.assertEqual({k: record.get(k) for k in fields}, fields, record)
        with self.subTest(output="-status -json, its bytes"):
            # JSON needs C0 escaped, so that any writer does it; DEL and C1 it allows raw, and a
            # terminal that shows the output obeys them all the same.
            self.assert_no_raw_controls(out, "-status -json")


class LocalEscapesTest(EveryOutput, HostileCase):
    """The local backend's peers are other runs of lock on the machine: a holder named with
    -name, whose child then rewrites its record, and a waiter named so too."""

    def setUp(self):
        super().setUp()
        self.prefix = "p"

    def test_a_holders_and_a_waiters_records_reach_no_output_raw(self):
        holder = self.hold("-name", HOSTILE_NAME, before=f"echo $LOCK_KEY > {self.path('key')}; ")
        # In place, the holder's own file: its path check has nothing to notice.
        with open(read_file(self.path("key")).strip(), "r+") as f:
            f.write(hostile_record("p", pid=holder.pid) + "\n")
            f.truncate()
        waiter = self.start_lock("-name", HOSTILE_NAME, "p", "true")
        wait_for(lambda: self.tickets(), what="the waiter to queue")

        out, json_out = self.status_outputs()
        self.check_status_text(out, [HOSTILE_NAME, HOSTILE_HOST, HOSTILE_SINCE])
        self.check_status_json(json_out, [dict(HOLDER_FIELDS, pid=holder.pid)],
                               [{"name": HOSTILE_NAME, "pid": waiter.pid}])
        self.check_waiter([HOSTILE_HOST, HOSTILE_SINCE])

        self.release()
        code, _, err = self.finish_bounded(holder, 5)
        self.assertEqual((code, err), (0, ""))
        code, _, err = self.finish_bounded(waiter, 5)
        self.assertEqual((code, err), (0, ""))


class EtcdEscapesTest(EveryOutput, HostileCase, EtcdTestCase):

    def put(self, key, value, prefix=None):
        """Puts a key as a peer does, with etcdctl and no lease: it stays until the test ends."""
        self.addCleanup(self.etcdctl, "del", key)
        self.etcdctl("put", key, value)

    def etcdctl(self, *args):
        r = subprocess.run(self.etcd.etcdctl(*args), env=self.env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=20 * SLOW)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_peers_key_and_value_are_escaped_in_verbose(self):
        key = self.prefix + "/\x1b]0;PWNED\x07\x1b[2J"
        self.put(key, "\x1b[31mred\x1b]0;title\x07\x1b[?1049h\x1b[2J")
        code, _, err = self.run_bounded(["-verbose", "-timeout", "1s", self.prefix, "true"], 1 + 10)
        text = err.decode("utf-8", "surrogateescape")
        self.assertEqual(code, 1, text)
        self.assertIn("timed out", text)
        self.assert_no_raw_controls(err, "-verbose")
        self.assertIn(escaped(key), text)

    def test_every_field_of_a_peers_keys_reaches_no_output_raw(self):
        # The holder: a record of lock's, every text in it hostile. Behind it, a key with no
        # value, which lock names by the key itself.
        self.put(self.prefix + "/\x1b]0;PWNED\x07", hostile_record(self.prefix))
        second = self.prefix + "/\x1b[2Jsecond\x9b1m"
        self.put(second, "")

        out, json_out = self.status_outputs()
        self.check_status_text(out, [HOSTILE_NAME, HOSTILE_HOST, HOSTILE_SINCE, second])
        self.check_status_json(json_out, [HOLDER_FIELDS], [{"name": second}])
        self.check_waiter([HOSTILE_HOST, HOSTILE_SINCE])

        with self.subTest(output="a conflict's message"):
            # A semaphore's key where a lock is asked for: the refusal names it.
            other = self.prefix + "-conflict"
            key = other + "/sem2-\x1b]0;PWNED\x07\x9b2J"
            self.put(key, "")
            code, _, err = self.run_bounded(["-timeout", "1s", other, "true"], 1 + 10)
            self.assertEqual(code, 1, err)
            self.assert_one_line(err, "the conflict")
            self.assertIn(escaped(key), err.decode())


class ConsulEscapesTest(EveryOutput, HostileCase, ConsulTestCase):
    """On the Consul double, one per class, with ConsulTestCase's prefix per test and its ending
    (SIGTERM first, so that a holder lets go of its key before the harness kills it)."""

    def test_a_holders_value_is_escaped_once_in_status_and_raw_in_json(self):
        holder = self.hold("-value", "\033[2Jx", prefix=self.prefix)
        code, out, err = self.run_bounded(["-status", self.prefix], 20)
        self.assertEqual((code, err), (0, b""))
        self.assert_no_raw_controls(out, "-status")
        self.assertIn(b"value '\\x1b[2Jx'", out)
        self.assertNotIn(b"\\\\x1b", out)
        code, out, err = self.run_bounded(["-status", "-json", self.prefix], 20)
        self.assertEqual((code, err), (0, b""))
        self.assertIn(b'"\\u001b[2Jx"', out)
        self.assertEqual([h["value"] for h in json.loads(out)["holders"]], ["\x1b[2Jx"])
        self.release()
        code, _, err = self.finish_bounded(holder, 10)
        self.assertEqual((code, err), (0, ""))

    def test_every_field_of_a_holders_record_reaches_no_output_raw(self):
        holder = self.hold("-value", hostile_record(self.prefix), prefix=self.prefix)
        out, json_out = self.status_outputs()
        self.check_status_text(out, [HOSTILE_NAME, HOSTILE_HOST, HOSTILE_SINCE])
        self.check_status_json(json_out, [HOLDER_FIELDS])
        self.check_waiter([HOSTILE_HOST, HOSTILE_SINCE])
        self.release()
        code, _, err = self.finish_bounded(holder, 10)
        self.assertEqual((code, err), (0, ""))


@unittest.skipIf(ZOOKEEPER_MISSING, ZOOKEEPER_MISSING)
class ZooKeeperEscapesTest(EveryOutput, HostileCase):

    @classmethod
    def setUpClass(cls):
        cls.zk = cls.enterClassContext(ZooKeeperServer(tick_time=500))

    def setUp(self):
        super().setUp()
        self.prefix = self.id().rsplit(".", 1)[1]
        self.env.update(LOCK_BACKEND="zookeeper", ZOOKEEPER_ENDPOINTS=self.zk.connect_string)
        self.addCleanup(self.zk.delete, "/" + self.prefix, recursive=True)

    def test_every_field_of_a_peers_node_data_reaches_no_output_raw(self):
        # Curator's layout, as a peer's client writes it: the holder's node carries a record of
        # lock's, the next one's whatever bytes its client chose.
        node = f"/{self.prefix}/_c_{{}}-lock-"
        self.zk.create(node.format(uuid.uuid4()), hostile_record(self.prefix, limit=1).encode(),
                       ephemeral=True, sequence=True, makepath=True)
        self.zk.create(node.format(uuid.uuid4()), HOSTILE_BYTES, ephemeral=True, sequence=True)

        out, json_out = self.status_outputs()
        self.check_status_text(out, [HOSTILE_NAME, HOSTILE_HOST, HOSTILE_SINCE, HOSTILE_BYTES])
        self.check_status_json(json_out, [HOLDER_FIELDS], [
            {"value": HOSTILE_BYTES.decode("utf-8", "replace"),
             "value_base64": base64.b64encode(HOSTILE_BYTES).decode()}])
        self.check_waiter([HOSTILE_HOST, HOSTILE_SINCE])


if __name__ == "__main__":
    unittest.main()
