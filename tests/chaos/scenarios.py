"""The backends under test, the faults, and one scenario: M contenders loop on one prefix while a
victim `lock` takes its turn and the fault is aimed at it (or at the server while it holds).

Only the victim goes through the fault proxy; the other contenders talk to the server directly, so
they take over the moment the server lets them, which is what makes an overlap visible. A fault
states what the victim must do: ride it out ("survive": its section runs its course), lose the
hold in time ("stop": the checker then holds its end against the lease expiry), refuse a bad reply
at acquisition ("refuse": exit 1, one line, no child), or nothing beyond safety (None).

Pauses beyond the TTL: of lock alone, or of lock and its child's process group, its watchdog keeps
the deadline, so these are "stop" faults like any other; of the whole client (lock, its watchdog
and the child's group), nothing on the machine can act, and the overlap is allowed. With n = 1
the sections also share a register (register.py) where they read, wait and write back plus one,
carrying their fencing token: the whole client's pause is where the register without the token
check loses updates and the one with it must not.

TTLs: the faults that must be ridden out run at lock's defaults (Consul 15s, etcd, ZooKeeper and
PostgreSQL 10s, -kill-after 5s, -monitor-retry 3), the settings README.md promises that for; the
others run at short TTLs (Consul 10s, its shortest; etcd, ZooKeeper and PostgreSQL 5s with
-kill-after 1s), so that a fault "> TTL" is over quickly. Consul's lock-delay is 0 throughout:
with it, a lost lock would stay unclaimed 15s longer, hiding nothing but slowing everything.
"""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "e2e"), os.path.join(HERE, "..", "consul_double")]

from checker import Row, check  # noqa: E402
from contenders import Contenders, LogWatcher, alive  # noqa: E402
from etcd_server import EtcdServer  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
from fixture import ConsulDouble  # noqa: E402
from harness import LOCK, PATH_CHECK_PERIOD, SLOW  # noqa: E402
from pg_messages import PgMessages, idle_expiry  # noqa: E402
from postgres_server import PostgresServer, missing as postgres_missing  # noqa: E402
from register import RegisterStore  # noqa: E402
from zk_frames import UpstreamFrames, zk_created_path  # noqa: E402
from zookeeper_server import ZooKeeperServer, missing as zookeeper_missing  # noqa: E402

# Failures of lock already known and reported: (backend, fault or None for all, n or None for
# all) -> (kind, why), kind one of checker.KINDS or a tuple of them. Such a row still runs and
# prints, as "xfail"; any other kind of failure in it is still a FAIL, and a clean run shows as
# XPASS, so the entry can go.
EXPECTED_FAILURES = {}

# Replies that must never count, by backend and phase: a path-like session ID (Consul: as the
# answer to creating a session, and to renewing one); a negative lease ID and a txn "success"
# without a create revision (etcd, one body for every request).
MALFORMED = {
    ("consul", "acquire"): '{"ID":"../../kv/x"}',
    ("consul", "hold"): '[{"ID":"../../kv/x","TTL":"10s"}]',
    ("etcd", "acquire"): '{"header":{"revision":"0"},"ID":"-5","TTL":"5","succeeded":true,'
                         '"result":{"ID":"-5","TTL":"99"}}',
}
MALFORMED[("etcd", "hold")] = MALFORMED[("etcd", "acquire")]


# Set on ^C or SIGTERM: every scenario ends at its next step, stopping what it started.
ABORT = threading.Event()


def expected_failure(backend, fault, n):
    for key in ((backend, fault, n), (backend, fault, None), (backend, None, n),
                (backend, None, None)):
        if key in EXPECTED_FAILURES:
            return EXPECTED_FAILURES[key]
    return None


def wait_until(condition, timeout, step=0.01):
    """Polls condition until it is true (True) or the timeout passes (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def peak_rss_kb(pid):
    """VmHWM of a running process (it starts over at exec, unlike wait4's ru_maxrss, which
    would count the Python interpreter the child was forked from)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def finish(proc, timeout):
    """Waits for a lock run; returns (exit status, stderr, peak RSS in kB), or None on timeout.
    Polls its RSS while it runs, so nothing else may reap it (test with alive(), not poll())."""
    deadline = time.monotonic() + timeout
    rss = 0
    while True:
        rss = max(rss, peak_rss_kb(proc.pid))
        pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            with proc.stderr:
                return proc.returncode, proc.stderr.read(), rss
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)


# ---- backends ------------------------------------------------------------------------------------
# Each is a context manager around its server. flags(address, short) are lock's flags (address:
# the victim's way through the proxy); ttl(short) the lease TTL those flags give; watch(run, v)
# and deadline(run, v) bracket a victim's hold to learn its lease's expiry as the server sees it.

class LocalBackend:
    """The state directory on a small tmpfs of its own where mounting is permitted, so that the
    file system can be filled without touching anyone else's."""
    name, settle = "local", 0.2

    def __enter__(self):
        self.top = tempfile.mkdtemp(prefix="lock-chaos-local-")
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,nr_inodes=4096", "tmpfs",
                            self.top], capture_output=True, text=True)
        self.mounted = r.returncode == 0
        self.why_not_mounted = r.stderr.strip()
        self.dir = os.path.join(self.top, "state")
        return self

    def __exit__(self, *exc):
        if self.mounted:
            subprocess.run(["umount", "--lazy", self.top], check=True)
        shutil.rmtree(self.top, ignore_errors=True)

    def leftovers(self, prefix=None):
        """What the prefixes left in the state directory (its fencing counter stays for good)."""
        found = []
        if os.path.isdir(self.dir):
            for name in os.listdir(self.dir):
                if name != "@fence":
                    path = os.path.join(self.dir, name)
                    found.append(f"{name}/{{{','.join(sorted(os.listdir(path)))}}}"
                                 if os.path.isdir(path) else name)
        return found

    def target(self):
        return None  # no server, no proxy

    def ttl(self, short):
        return None

    def flags(self, address=None, short=False):
        return ["-backend", "local", "-state-dir", self.dir]

    def watch(self, run, v):
        pass

    def deadline(self, run, v):
        return None


class ConsulBackend:
    """The Consul double; with `short`, Consul's shortest TTL."""
    name, settle = "consul", 0.3

    def __enter__(self):
        self.double = ConsulDouble().__enter__()
        self.address = self.double.http_addr
        return self

    def __exit__(self, *exc):
        self.double.__exit__(*exc)

    def target(self):
        host, port = self.address.rsplit(":", 1)
        return host, int(port)

    def ttl(self, short):
        return 10.0 if short else 15.0

    def flags(self, address=None, short=False):
        return (["-backend", "consul", "-http-addr", address or self.address, "-lock-delay", "0s"]
                + (["-session-ttl", "10s"] if short else []))

    def victim_address(self, proxy):
        return proxy.address

    def server_pid(self):
        return self.double.proc.pid

    def restart(self, down):
        """The double's own restart: the API goes away and comes back with KV and sessions
        kept, every TTL started afresh, as on a new leader."""
        self.double.restart(down)
        if not self.double.wait_up(30 * SLOW):
            raise RuntimeError("the Consul double did not come back")

    def fail_5xx(self, run, seconds):
        before = time.monotonic()
        self.double.fail_5xx(seconds, status=503, body="No cluster leader")
        run.windows.append((before, time.monotonic() + seconds))

    def watch(self, run, v):
        pass  # the double logs every request; start_victim() cleared the log

    def before_victim(self, run):
        # Only the victim's renewals matter; the log would otherwise grow for the whole bench.
        self.double.clear_requests()

    def deadline(self, run, v):
        """Replays the double's rule: a session expires TTL after its creation or its last
        renewal, and a renewal that arrives after that (or while the double answered errors or
        was paused) renews nothing. The creation is bounded by when the victim's lock was
        started; a request's arrival comes before its processing, so this is a lower bound."""
        ttl = self.ttl(run.fault.short)
        renewals = sorted(
            r["at"] for r in self.double.requests()
            if r["method"] == "PUT" and r["path"] == f"/v1/session/renew/{v.section.lease}"
            and not any(a <= r["at"] <= b for a, b in run.windows))

        def expiry(until):
            bound = v.section.spawned + ttl
            for at in renewals:
                if at >= bound or at > until:
                    break
                bound = at + ttl
            return bound
        return _as_of_end(expiry, v.section.end)


def _as_of_end(expiry, end):
    """The lease deadline to hold a child's end against: the expiry in force when it ended (from
    what the server saw until then), which makes "closest" the margin lock really left. Should
    that be earlier than the end, renewals the server took later (requests that waited in a
    proxy's buffers) count too: the server only takes one before the lease expires, so the lease
    was then still alive when the child ended."""
    at_end = expiry(end) if end is not None else None
    return at_end if at_end is not None and end <= at_end else expiry(float("inf"))


class LeasePoller(threading.Thread):
    """Polls an etcd lease's TimeToLive every 20 ms. An answer of R seconds to a request sent at
    t proves the lease lives until at least t + R (etcd truncates); bound() is the latest such
    proof. Once renewals stop, the answers count down and the bound comes within one poll of the
    true expiry; while renewals go on it stays up to a second early, on the safe side."""

    def __init__(self, url, lease):
        super().__init__(daemon=True)
        self.url, self.lease = url, lease
        self.proofs = []  # (sent, sent + R)
        self.stopping = threading.Event()

    def bound(self, until):
        """The latest expiry proven by polls sent until `until`."""
        return max((b for sent, b in self.proofs if sent <= until), default=None)

    def run(self):
        body = json.dumps({"ID": str(self.lease)}).encode()
        while not self.stopping.wait(0.02):
            sent = time.monotonic()
            try:
                req = urllib.request.Request(self.url + "/v3/lease/timetolive", body, method="POST")
                with urllib.request.urlopen(req, timeout=0.5) as r:
                    ttl = int(json.load(r).get("TTL", -1))
            except (OSError, ValueError):
                continue  # paused or restarting: no proof either way
            if ttl < 0:
                return  # gone
            self.proofs.append((sent, sent + ttl))

    def stop(self):
        self.stopping.set()
        self.join(5)


class EtcdBackend:
    """A real etcd; with `short`, a 5 s lease and a 1 s grace, so that expiries come quickly."""
    name, settle = "etcd", 1.1  # a second of TimeToLive polls before the fault

    def __enter__(self):
        self.server = EtcdServer().__enter__()
        self.address = self.server.url
        self.pollers = {}
        return self

    def __exit__(self, *exc):
        for poller in self.pollers.values():
            poller.stop()
        self.server.__exit__(*exc)

    def target(self):
        host, port = self.address.rsplit("/", 1)[1].rsplit(":", 1)
        return host, int(port)

    def ttl(self, short):
        return 5.0 if short else 10.0

    def flags(self, address=None, short=False):
        return (["-backend", "etcd", "-endpoints", address or self.address]
                + (["-session-ttl", "5s", "-kill-after", "1s"] if short else []))

    def victim_address(self, proxy):
        return proxy.url

    def server_pid(self):
        return self.server.proc.pid

    def restart(self, down):
        """A crash and a restart on the same data directory and ports."""
        proc = self.server.proc
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(down)  # the length of the outage, not a wait for an event
        self.server.proc = subprocess.Popen(proc.args, stdin=subprocess.DEVNULL,
                                            stdout=self.server.log, stderr=subprocess.STDOUT)
        if not wait_until(self.server.healthy, 30 * SLOW, 0.05):
            raise RuntimeError("etcd did not come back after its restart")

    def before_victim(self, run):
        pass

    def watch(self, run, v):
        """Starts polling the lease of the victim's key (<prefix>/<lease hex>, or sem<N>-<hex>)."""
        name = v.section.lease.rsplit("/", 1)[-1].rsplit("-", 1)[-1]
        poller = LeasePoller(self.address, int(name, 16))
        poller.start()
        self.pollers[v.tag] = poller

    def deadline(self, run, v):
        poller = self.pollers.pop(v.tag, None)
        if poller is None:
            return None
        poller.stop()
        if not poller.proofs:
            return None
        return _as_of_end(lambda until: poller.bound(until) or -1.0, v.section.end)


class ZooKeeperBackend:
    """A real ZooKeeper (Debian's 3.8, tests/e2e/zookeeper_server.py) ticking every 500 ms, so
    that it grants any timeout from 1 s to 10 s as asked and expires a session at most a tick
    after the timeout; it reaps emptied container nodes every 250 ms. The victim's session is
    kept as a lease (README.md): lock's defaults (10 s, -kill-after 5s) for the faults to ride
    out, and with `short` a 5 s session and a 1 s grace."""
    name, settle = "zookeeper", 0.5
    TICK_MS = 500

    def __enter__(self):
        why = zookeeper_missing()
        if why:
            raise RuntimeError(f"ZooKeeper fixtures unavailable: {why}")
        self.server = ZooKeeperServer(tick_time=self.TICK_MS, container_check_ms=250).__enter__()
        self.address = self.server.connect_string
        self.frames = UpstreamFrames()
        self.granted = {}  # victim's tag -> the session timeout the server granted, in seconds
        return self

    def __exit__(self, *exc):
        self.server.__exit__(*exc)

    def target(self):
        host, port = self.address.rsplit(":", 1)
        return host, int(port)

    def make_proxy(self, host, port):
        """The victim's proxy reports what it hands the server, for deadline()."""
        return FaultProxy(host, port, on_upstream=self.frames.feed)

    def ttl(self, short):
        """The session timeout the flags ask for, which this server grants as it is."""
        return 5.0 if short else 10.0

    def flags(self, address=None, short=False):
        return (["-backend", "zookeeper", "-endpoints", address or self.address]
                + (["-session-ttl", "5s", "-kill-after", "1s"] if short else []))

    def victim_address(self, proxy):
        return proxy.address

    def server_pid(self):
        return self.server.pid

    def restart(self, down):
        """SIGKILL, and a start on the same port and data: sessions come back with the snapshot,
        each with its timeout started afresh."""
        self.server.kill()
        time.sleep(down)  # the length of the outage, not a wait for an event
        self.server.restart()

    def before_victim(self, run):
        self.frames.clear()  # only the victim's requests matter

    def watch(self, run, v):
        """Learns the timeout the server granted the victim's session (`cons`), which deadline()
        counts with: lock must follow the grant, whatever it asked for. The proxy reports every
        request; start_victim() cleared the record."""
        sid = self.session_of(v)
        for c in self.server.connections():
            if c["sid"] == sid and c["to"] > 0:
                self.granted[v.tag] = c["to"] / 1000.0
                return
        run.row.notes.append(f"{v.tag}: session {sid:x} not among the server's connections; "
                             "its deadline counts with the timeout asked for")

    def session_of(self, v):
        """The victim's session id (LOCK_SESSION, hex, as the section logs it)."""
        return int(v.section.lease, 16)

    def nodes_of(self, run, v):
        """The victim's own nodes (its lock node, or its lease node with -n 2: one, unless
        protected mode made a second), from the server's list of ephemeral nodes by session."""
        mine = self.server.ephemerals().get(self.session_of(v), [])
        base = "/" + run.crowd.prefix + "/"
        return [p for p in mine if p.startswith(base) and not p.startswith(base + "locks/")]

    def deadline(self, run, v):
        """The Consul double's rule, on what the server can have read: the session expires no
        earlier than the granted timeout after the last request the server read from it
        (ZooKeeper then rounds up to a tick), and a request that reached it after that (or while
        it was paused) renews nothing. The session was created after the victim's lock was
        started. A restart only starts every timeout afresh: this stays a lower bound."""
        ttl = self.granted.pop(v.tag, None) or self.ttl(run.fault.short)
        sent = sorted(at for at in self.frames.sent()
                      if not any(a <= at <= b for a, b in run.windows))

        def expiry(until):
            bound = v.section.spawned + ttl
            for at in sent:
                if at >= bound or at > until:
                    break
                bound = at + ttl
            return bound
        return _as_of_end(expiry, v.section.end)

    def leftovers(self, prefix):
        """What the scenario's prefix still holds once every lock is gone: a killed lock's session
        expires within its timeout, and the server reaps the emptied containers; anything left
        after that is a leak."""
        path = "/" + prefix
        gone = wait_until(lambda: self.server.exists(path) is None, (self.ttl(False) + 10) * SLOW,
                          0.05)
        if gone:
            return []
        return sorted(self.server.tree(path))


class PostgresBackend:
    """A real PostgreSQL (Debian's, tests/e2e/postgres_server.py). The victim's lease is its
    session, which the server ends once it has been idle for the TTL (idle_session_timeout, see
    src/backend/postgres/pg_lease.hpp): lock's defaults (10 s, -kill-after 5s) for the faults to
    ride out, and with `short` 5 s and a 1 s grace.

    The session is also the connection: whatever closes it (lock killed, a reset, the client's own
    Terminate, pg_terminate_backend, a restart) lets its lock go at once, with no TTL to wait out.
    The faults that end it at the server set the victim's deadline to that instant themselves;
    deadline() is the idle expiry, or the client's Terminate, as the victim's messages through the
    proxy tell them (pg_messages.py)."""
    name, settle = "postgres", 0.5
    session_is_connection = True

    def __enter__(self):
        why = postgres_missing()
        if why:
            raise RuntimeError(f"PostgreSQL fixtures unavailable: {why}")
        self.server = PostgresServer().__enter__()
        self.server.settle()  # a fresh server's first turns wait out its forgotten holders
        self.messages = PgMessages()
        return self

    def __exit__(self, *exc):
        self.server.__exit__(*exc)

    def target(self):
        return self.server.host, self.server.port

    def make_proxy(self, host, port):
        """The victim's proxy reports what it hands the server, for deadline()."""
        return FaultProxy(host, port, on_upstream=self.messages)

    def ttl(self, short):
        return 5.0 if short else 10.0

    def flags(self, address=None, short=False):
        return (["-backend", "postgres", "-endpoints", address or self.server.conninfo()]
                + (["-session-ttl", "5s", "-kill-after", "1s"] if short else []))

    def victim_address(self, proxy):
        return self.server.conninfo(port=proxy.port)

    def server_pid(self):
        return self.server.pid

    def pause(self):
        """The postmaster and every backend: SIGSTOP of the postmaster alone would leave the
        sessions' own processes answering."""
        self.server.pause()

    def resume(self):
        self.server.resume()

    def restart(self, down):
        """SIGKILL of the postmaster and its backends, and a start on the same port and data
        (crash recovery). Every session ends with the crash, its locks with it. Returns when the
        server could first accept a connection again: nobody can take a lock before."""
        self.server.kill()
        time.sleep(down)  # the length of the outage, not a wait for an event
        back = time.monotonic()
        self.server.start()
        return back

    def session_of(self, v):
        """The server process of the victim's session ($LOCK_SESSION, as the section logs it)."""
        return int(v.section.lease)

    def before_victim(self, run):
        self.messages.clear()  # only the victim's messages matter

    def watch(self, run, v):
        pass  # the proxy reports every message; start_victim() cleared the record

    def deadline(self, run, v):
        """The idle expiry (pg_messages.idle_expiry) of the victim's session. None once its lock
        was killed: its connection closed then, and the server let the lock go at a moment the
        harness does not see (only the exclusion speaks for that fault)."""
        if v.killed_at is not None:
            return None
        ttl = self.ttl(run.fault.short)
        messages = self.messages.messages()
        # A Terminate sent while the server was paused is read once it goes on, not before.
        messages = [(c, next((b for a, b in run.pauses if k == "X" and a <= at <= b), at), k)
                    for c, at, k in messages]
        return _as_of_end(lambda until: idle_expiry(messages, ttl, v.section.spawned,
                                                    v.section.start, until, run.windows),
                          v.section.end)

    def leftovers(self, prefix):
        """Sessions still connected once every lock is gone (the scenarios of a lane take turns on
        its server, so every session is this one's): a killed lock's ends as soon as the server
        sees its connection close, a paused one's within its TTL; anything left after that is a
        leak."""
        gone = wait_until(lambda: not self.server.sessions(), (self.ttl(False) + 10) * SLOW, 0.2)
        if gone:
            return []
        return sorted(f"pid {s['pid']} {s['state']}: {s['query'][:200]!r}"
                      for s in self.server.sessions())


BACKENDS = {"local": LocalBackend, "consul": ConsulBackend, "etcd": EtcdBackend,
            "zookeeper": ZooKeeperBackend, "postgres": PostgresBackend}


# ---- faults --------------------------------------------------------------------------------------

@dataclass
class Fault:
    name: str
    inject: object            # inject(run, victim): blocks while the fault lasts
    expect: str | None        # "survive", "stop", "refuse", or None (safety only)
    length: float = 0.0       # how long the fault lasts; a ridden-out section outlasts it
    short: bool = True        # shortest TTLs (else lock's defaults; see the module's doc)
    servers: bool = True      # also for consul and etcd
    local: bool = False       # also for local
    phase: str = "hold"       # "hold": aimed at a victim holding; "acquire": before it asks
    server_wide: bool = False  # hits every contender's lease: any of them may lose its hold
    touches_server: bool = False  # the others meet it too: their runs may fail (no child started)
    n2: bool = False          # worth running with -n 2 too (the semaphore's own paths)
    http: bool = False        # HTTP replies (a status, a body): Consul and etcd only
    only: tuple = ()          # for these backends alone (when not empty)
    not_for: tuple = ()       # never for these backends (the fault's row says why)
    ends_in_pause: bool = False  # the victim's section ends within the pause (_pause_beyond_ttl)
    says: str | None = None   # how the victim's one line of stderr must begin


def _kill_lock(run, v):
    v.killed_at = time.monotonic()
    os.kill(v.proc.pid, signal.SIGKILL)
    if not wait_until(lambda: not alive(v.section.pid) and not alive(v.section.helper), 2 * SLOW):
        run.problem(f"the child tree outlived kill -9 of lock by more than {2 * SLOW:.0f}s")


def _stop_lock(seconds):
    def inject(run, v):
        os.kill(v.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)  # the length of the fault
        finally:
            os.kill(v.proc.pid, signal.SIGCONT)
    return inject


# How far past the TTL a pause "> TTL" lasts at least: the lease expires, and another holder
# takes over (the pause goes on until one has, see _pause_beyond_ttl).
BEYOND_TTL = 1.5


def _watchdog_of(lock_pid):
    """lock's watchdog: its child named lock-watchdog (the companion lock-net or lock-zookeeper
    runs in lock's own pid, so lock's children are the watchdog's and nothing else's)."""
    try:
        tasks = os.listdir(f"/proc/{lock_pid}/task")
    except OSError:
        return None
    for task in tasks:
        try:
            with open(f"/proc/{lock_pid}/task/{task}/children") as f:
                children = [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
        for child in children:
            try:
                with open(f"/proc/{child}/comm") as f:
                    if f.read().strip() == "lock-watchdog":
                        return child
            except OSError:
                continue
    return None


def _pause_beyond_ttl(child=False, watchdog=False):
    """SIGSTOP of the victim's lock beyond its TTL: alone, with its child's process group (the
    child leads its own: pgid == its pid), or with that group and lock's watchdog, which is the
    whole client machine paused. The pause lasts the TTL plus BEYOND_TTL, and on until a section
    of someone else that began during the pause has ended: a take-over has written the register.
    The victim's section was made to end within the pause (Fault.ends_in_pause), after its lease
    deadline, so that a child still alive then writes from a read its successor has overwritten.

    While the watchdog runs it keeps the deadline: the child must be dead by it (SIGKILL works on
    a stopped process), and once continued, lock says the lock was lost and exits 1. A paused
    machine cannot stop anything: its overlap is allowed, and the fencing token is all that
    protects the register. The child's group is continued first, and the rest only once the child
    has written and ended (or is gone): the order that lets a stale write land, as one already on
    its way when the machine stopped would."""
    def inject(run, v):
        lock, pgid = v.proc.pid, v.section.pid
        stopped = [("lock", lambda sig: os.kill(lock, sig))]
        if watchdog:
            dog = _watchdog_of(lock)
            if dog is None:
                run.problem(f"{v.tag}: no lock-watchdog among lock's children: "
                            f"{run.crowd.snapshot()}")
                return
            run.allowed.add(v.section.pid)
            stopped.append(("watchdog", lambda sig, pid=dog: os.kill(pid, sig)))
        if child:
            stopped.append(("the child's group", lambda sig: os.killpg(pgid, sig)))
        began = time.monotonic()
        try:
            # In this order, each before the one whose stop it would see: lock continues a
            # watchdog it finds stopped, and the watchdog is told when its child stops.
            for _, send in stopped:
                send(signal.SIGSTOP)
            time.sleep(run.ttl + BEYOND_TTL)  # the length of the fault, at least
            limit = (2 * run.ttl + 30) * SLOW
            if not run.watcher.wait(lambda ss: any(s.tag != v.tag and s.start > began
                                                   and s.how == "done" for s in ss), limit):
                run.problem(f"nobody took over within {run.ttl + BEYOND_TTL + limit:.0f}s of "
                            f"{v.tag}'s pause")
        finally:
            for what, send in reversed(stopped):
                if what == "the child's group":
                    # Killed in time, its pid may be anyone's by now.
                    if v.section.end is None:
                        try:
                            send(signal.SIGCONT)
                        except ProcessLookupError:
                            pass
                        run.watcher.wait(lambda ss: v.section.end is not None, 5 * SLOW)
                else:
                    send(signal.SIGCONT)
        if not watchdog and not wait_until(lambda: v.section.end is not None, 3 * SLOW):
            run.problem("lock did not stop its child within 3s of SIGCONT, its lease long expired")
        if watchdog and run.register and not run.register.refused(v.section.pid):
            run.problem(f"{v.tag}'s child made no stale write after the pause (it ended "
                        f"{v.section.how}): the register was not put to the test")
    return inject


def _pause_server(seconds):
    def inject(run, v):
        pid = run.backend.server_pid()
        pause = getattr(run.backend, "pause", lambda: os.kill(pid, signal.SIGSTOP))
        resume = getattr(run.backend, "resume", lambda: os.kill(pid, signal.SIGCONT))
        start = time.monotonic()
        pause()
        try:
            time.sleep(seconds)  # the length of the fault
        finally:
            resumed = time.monotonic()  # the server reads nothing before
            resume()
            run.pauses.append((start, resumed))
            # What arrives just after the resume may meet an expired session or be renewed; count
            # neither as a renewal.
            run.windows.append((start, time.monotonic() + 0.5))
    return inject


def _pause_server_beyond_ttl(run, v):
    _pause_server(run.ttl + 1.5)(run, v)


def _restart_server(run, v, forgotten_for=0.0):
    """For a server whose sessions are its connections (PostgreSQL), the crash ended every
    session, and the server hands locks on once it is back; the turn it hands on begins only
    `forgotten_for` later, by when a holder it forgot must have stopped."""
    back = run.backend.restart(2.0)
    if getattr(run.backend, "session_is_connection", False):
        run.deadlines[v.section.pid] = back + forgotten_for


def _restart_server_unseen(run, v):
    """The server crashes and comes back while the victim is cut off from it: the proxy
    blackholes its connection (the crash's FIN included) until its lock gives up. The victim
    sees silence only, and must stop by its lease deadline. For PostgreSQL, whose restarted
    server has forgotten every session and hands locks on at once, that is -session-ttl after
    the server came back, when the next holder's turn begins (pg_recipe.cpp). (The other servers
    keep their leases across a restart, which makes this "proxy blackhole > TTL" for them.)"""
    run.proxy.set_mode("blackhole")
    try:
        _restart_server(run, v, forgotten_for=run.ttl)
        wait_until(lambda: not alive(v.proc.pid) or v.section.end is not None,
                   (run.ttl * 2 + 10) * SLOW, 0.02)
    finally:
        run.proxy.set_mode("pass")


def _proxy(mode, length, **kw):
    def inject(run, v):
        run.proxy.set_mode(mode, **kw)
        time.sleep(length)  # the length of the fault
        run.proxy.set_mode("pass")
    return inject


def _proxy_until_lost(mode, **kw):
    """The victim's server stays unreachable until its lock gives up (or well past the TTL)."""
    def inject(run, v):
        run.proxy.set_mode(mode, **kw)
        try:
            wait_until(lambda: not alive(v.proc.pid) or v.section.end is not None,
                       (run.ttl * 2 + 10) * SLOW, 0.02)
        finally:
            run.proxy.set_mode("pass")
    return inject


def _remove_state_dir(run, v):
    """rm -rf of the local state directory while the victim holds (renamed away first, so that
    it is gone at one instant), with every other holder of the moment (-n 2). Newcomers take the
    lock at once in a fresh one: README.md allows that overlap until each old holder's path check
    notices (every PATH_CHECK_PERIOD) and its child stops, provided the newcomer's token is
    higher. The waiters start over in the fresh directory: none of their runs may fail."""
    removed = time.monotonic()
    holders = run.watcher.open_sections()
    for s in holders:
        run.allowed.add(s.pid)
        run.deadlines[s.pid] = removed
    gone = run.backend.dir + ".gone"
    os.rename(run.backend.dir, gone)
    # A holder in the old directory whose child starts only now is just as lost, and the watcher
    # may not have seen the start of one that began just before: the sections tell them by the
    # slot file they hold (see contenders.py). Each file is opened before it is unlinked, and kept
    # open so that no new file can take its inode number before the check; a run that had the old
    # directory open may still create one in it, so the removal goes on until the directory is gone.
    for _ in range(1000):
        for root, dirs, files in os.walk(gone, topdown=False):
            for name in files:
                path = os.path.join(root, name)
                if name.startswith("slot."):
                    try:
                        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
                    except OSError:
                        pass
                    else:
                        st = os.fstat(fd)
                        key = f"{st.st_dev}:{st.st_ino}"
                        if key in run.lost_slots:
                            os.close(fd)
                        else:
                            run.lost_slots[key] = (removed, fd)
                try:
                    os.unlink(path)
                except OSError:
                    pass
            for name in dirs:
                try:
                    os.rmdir(os.path.join(root, name))
                except OSError:
                    pass
        try:
            os.rmdir(gone)
            break
        except FileNotFoundError:
            break
        except OSError:
            continue
    limit = PATH_CHECK_PERIOD + 2.0 * SLOW
    if not wait_until(lambda: all(s.end is not None for s in holders), limit):
        run.problem(f"a holder's child still ran {limit:.1f}s after its state directory went")


def _fill_state_fs(seconds):
    """No free inode and no free page on the state directory's file system for a while: runs that
    start then fail (and must leave nothing behind), the victim holds on and lets go normally."""
    def inject(run, v):
        if not run.backend.mounted:
            run.row.notes.append(f"not injected: cannot mount a tmpfs ({run.backend.why_not_mounted})")
            return
        filler = os.path.join(run.backend.top, "filler")
        os.mkdir(filler)
        try:
            with open(os.path.join(filler, "pages"), "wb") as f:
                try:
                    while True:
                        f.write(b"x" * 65536)
                        f.flush()
                except OSError:
                    pass  # ENOSPC: every page taken
            try:
                for i in range(1 << 20):
                    os.close(os.open(os.path.join(filler, str(i)), os.O_CREAT | os.O_WRONLY))
            except OSError:
                pass  # ENOSPC: every inode taken
            time.sleep(seconds)  # the length of the fault
        finally:
            shutil.rmtree(filler, ignore_errors=True)
    return inject


def _delete_node(run, v):
    """An operator deletes the victim's node (ZooKeeper): the next in line may take over at once,
    an overlap README.md allows until lock's watch fires and its child stops, within a second,
    provided the newcomer's token is higher."""
    nodes = run.backend.nodes_of(run, v)
    if len(nodes) != 1:
        run.problem(f"{v.tag}'s session has {len(nodes)} nodes where it should have one: {nodes}")
        return
    node = nodes[0]
    removed = time.monotonic()
    run.allowed.add(v.section.pid)
    run.deadlines[v.section.pid] = removed
    run.backend.server.delete(node)
    limit = 1.0 + 2.0 * SLOW
    if not wait_until(lambda: v.section.end is not None, limit):
        run.problem(f"{v.tag}'s child still ran {limit:.1f}s after its node {node} was deleted")


# How soon a lock whose session the server ended (PostgreSQL) must have stopped its child: it sees
# the connection close as the server lets the lock go, and stops at once.
SESSION_END_LIMIT = 1.0


def _session_ended(run, v, end, what):
    """The victim's session ends at the server by `end()` (PostgreSQL): the lock goes to the next
    in line at that instant, before lock can know, an overlap nothing on the client can prevent.
    It is allowed until lock sees its connection close and stops its child, which must be within
    SESSION_END_LIMIT (more on a slow build), provided the newcomer's token is higher."""
    ended = time.monotonic()
    run.allowed.add(v.section.pid)
    run.deadlines[v.section.pid] = ended
    end()
    # Counted from the request's return (the session has ended by then, or is about to): what
    # came before it (psql starting up, on a loaded machine) is not lock's time.
    limit = SESSION_END_LIMIT * SLOW
    asked = time.monotonic()
    if not wait_until(lambda: v.section.end is not None, limit):
        run.problem(f"{v.tag}'s child still ran {limit:.1f}s after its session was {what}")
    else:
        run.lags.append(max(0.0, v.section.end - asked))


def _terminate_session(run, v):
    """pg_terminate_backend() of the victim's session, found by $LOCK_SESSION (the server process
    the section logged) and checked in pg_locks to hold an advisory lock."""
    pid = run.backend.session_of(v)
    held = run.backend.server.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
                                  "AND granted AND pid = %s", pid)
    if held != [("1",)]:  # the lock, or with -n 2 a slot (the line went with the token)
        run.problem(f"{v.tag}: its session (server process {pid}) holds {held} advisory locks, "
                    "not one")
        return
    _session_ended(run, v, lambda: run.backend.server.terminate(pid, wait=False), "terminated")


def _reset_session(run, v):
    """The proxy resets the victim's connection (a RST each way) and refuses new ones until its
    lock has exited: the server ends the session as it reads the RST."""
    try:
        _session_ended(run, v, lambda: run.proxy.set_mode("reset"), "reset")
        wait_until(lambda: not alive(v.proc.pid), 10 * SLOW, 0.02)
    finally:
        run.proxy.set_mode("pass")


def _watchdog_link(lock_pid):
    """A duplicate of lock's end of its socketpair with the watchdog (the one SOCK_SEQPACKET unix
    socket lock has open), taken with pidfd_getfd(2); None where that cannot be done. While the
    duplicate is open, the watchdog does not see lock's end close when lock dies."""
    try:
        with open("/proc/net/unix") as f:
            seqpacket = {line.split()[6] for line in f.readlines()[1:]
                         if len(line.split()) > 6 and line.split()[4] == "0005"}
        fds = [int(fd) for fd in os.listdir(f"/proc/{lock_pid}/fd")
               if os.readlink(f"/proc/{lock_pid}/fd/{fd}") in
               {f"socket:[{inode}]" for inode in seqpacket}]
        if len(fds) != 1:
            return None
        pidfd = os.pidfd_open(lock_pid)
    except OSError:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(438, pidfd, fds[0], 0)  # pidfd_getfd
        return fd if fd >= 0 else None
    finally:
        os.close(pidfd)


def _kill_lock_watchdog_late(seconds):
    """kill -9 of lock while its watchdog does not learn of it for `seconds`, as when a loaded
    machine does not schedule it: the harness keeps lock's end of their socketpair open meanwhile.
    DESIGN.md promises that the lock is not handed on while any of the child tree still runs;
    the other servers' leases outlive lock by their TTL whatever the watchdog does, while a
    PostgreSQL session ends as its connection closes, with lock."""
    def inject(run, v):
        link = _watchdog_link(v.proc.pid)
        if link is None:
            run.row.notes.append(f"not injected: no hold of lock's link to its watchdog "
                                 f"(pidfd_getfd) in {run.crowd.snapshot()}")
            return _kill_lock(run, v)
        try:
            v.killed_at = time.monotonic()
            os.kill(v.proc.pid, signal.SIGKILL)
            time.sleep(seconds)  # the length of the fault
        finally:
            os.close(link)
        if not wait_until(lambda: not alive(v.section.pid) and not alive(v.section.helper),
                          2 * SLOW):
            run.problem(f"the child tree outlived the watchdog's news of lock's death by more "
                        f"than {2 * SLOW:.0f}s")
    return inject


def _cut_at_create(run):
    """Armed before the victim starts (ZooKeeper): the first time its client sends the create of
    its own node (its lock node; with -n 2 also its lease node), the proxy closes the connection
    right after handing the request to the server, before the answer can come back. The create
    may have happened or not; the client reconnects to the same session, and lock must look for
    its node by its protection id before it makes another (Curator's protected mode): one node,
    and its section runs."""
    prefix = "/" + run.crowd.prefix + "/"
    seen = set()

    def on_frame(connection, body):
        if connection not in seen:  # a connection's first frame is its connect request
            seen.add(connection)
            return
        path = zk_created_path(body)
        name = path.rsplit("/", 1)[-1] if path and path.startswith(prefix) else ""
        kind = "lease" if "-lease-" in name else "lock" if "-lock-" in name else None
        if kind is None or kind in (k for k, _ in run.cuts):
            return
        run.cuts.append((kind, path))
        run.proxy.drop_all()
    run.cuts = []
    run.backend.frames.on_frame = on_frame


def _5xx_burst(run, v):
    if isinstance(run.backend, ConsulBackend):
        run.backend.fail_5xx(run, 2.5)  # the whole server, for every contender
        time.sleep(2.5)  # the length of the fault
    else:
        _proxy("http", 2.5, status=503, reason="Service Unavailable",
               body='{"error":"etcdserver: leader changed","code":14}')(run, v)


def _malformed(length):
    def inject(run, v):
        _proxy("http", length, status=200, reason="OK",
               body=MALFORMED[(run.backend.name, "hold")],
               headers={"Content-Type": "application/json", "X-Consul-Index": "7"})(run, v)
    return inject


def _malformed_now(run):
    run.proxy.set_mode("http", status=200, reason="OK",
                       body=MALFORMED[(run.backend.name, "acquire")],
                       headers={"Content-Type": "application/json", "X-Consul-Index": "7"})


def _endless_now(run):
    run.proxy.set_mode("endless", bytes='{"Key":"x","Value":"' + "A" * 1000 + '"},')


FAULTS = [
    Fault("none", None, None, short=False, local=True, n2=True),
    Fault("kill -9 lock", _kill_lock, None, local=True, n2=True),
    Fault("SIGSTOP lock 2s", _stop_lock(2.0), "survive", 2.0, short=False, local=True),
    # Its watchdog keeps the deadline: the child dies by it however long lock stays stopped.
    Fault("SIGSTOP lock > TTL", _pause_beyond_ttl(), "stop", n2=True, ends_in_pause=True,
          says="lock: lock lost: "),
    Fault("SIGSTOP lock + child group > TTL", _pause_beyond_ttl(child=True), "stop",
          ends_in_pause=True, says="lock: lock lost: "),
    # The whole client machine paused: nothing on it can act, the server hands the lock on, and
    # only the fencing token keeps the register right (the unchecked one loses updates).
    Fault("SIGSTOP whole client > TTL", _pause_beyond_ttl(child=True, watchdog=True), None,
          ends_in_pause=True),
    Fault("SIGSTOP server 2.5s", _pause_server(2.5), "survive", 2.5, short=False,
          touches_server=True),
    Fault("SIGSTOP server > TTL", _pause_server_beyond_ttl, "stop", server_wide=True,
          touches_server=True),
    Fault("server restart", _restart_server, None, 4.0, server_wide=True, touches_server=True),
    Fault("proxy delay 0.3s", _proxy("delay", 3.0, seconds=0.3), "survive", 3.0, short=False),
    Fault("proxy blackhole 2.5s", _proxy("blackhole", 2.5), "survive", 2.5, short=False),
    Fault("proxy blackhole > TTL", _proxy_until_lost("blackhole"), "stop", n2=True),
    # Not for PostgreSQL: its session is its connection, and a reset one is gone, its lock with
    # it, at once; "proxy reset, session ends" is its row.
    Fault("proxy reset 2.5s", _proxy("reset", 2.5), "survive", 2.5, short=False,
          not_for=("postgres",)),
    # Every connection refused until the session is lost: the client keeps reconnecting. (A
    # PostgreSQL client has nothing to reconnect to: its first reset ends the session.)
    Fault("proxy reset > TTL", _proxy_until_lost("reset"), "stop", only=("zookeeper",)),
    Fault("5xx 2.5s", _5xx_burst, "survive", 2.5, short=False, touches_server=True, http=True),
    Fault("5xx > TTL", _proxy_until_lost("http", status=503, reason="Service Unavailable",
                                         body="No cluster leader"), "stop", http=True),
    # Bad replies are failed requests like any other: ridden out as an outage is.
    Fault("malformed 2.5s", _malformed(2.5), "survive", 2.5, short=False, http=True),
    Fault("endless body 2.5s", _proxy("endless", 2.5, bytes="A" * 1000), "survive", 2.5,
          short=False, http=True),
    Fault("node deleted", _delete_node, "stop", n2=True, only=("zookeeper",)),
    Fault("connection cut at create", _cut_at_create, "survive", short=False, phase="acquire",
          n2=True, only=("zookeeper",)),
    # PostgreSQL's session ends with its connection, whoever ends it. A session ended at the
    # server, by an operator or a reset, hands the lock on before lock can know (allowed, as a
    # deleted node is). A lock killed outright is another matter: its watchdog is there to stop
    # the child, and the lock must not go before it has. Nor may a restart the holder does not
    # see hand it on before the holder's lease-safe deadline. ("connection cut at create" has no
    # counterpart: a statement cut off in flight ends the session it would have taken a lock on.)
    Fault("pg_terminate_backend", _terminate_session, "stop", n2=True, only=("postgres",)),
    Fault("proxy reset, session ends", _reset_session, "stop", n2=True, only=("postgres",)),
    Fault("kill -9 lock, watchdog late 1s", _kill_lock_watchdog_late(1.0), None, 1.0,
          only=("postgres",)),
    Fault("server restart, victim cut off", _restart_server_unseen, "stop", server_wide=True,
          touches_server=True, only=("postgres",)),
    Fault("rm -rf state dir", _remove_state_dir, "stop", servers=False, local=True,
          server_wide=True, n2=True),
    Fault("state fs full 2s", _fill_state_fs(2.0), "survive", 2.0, servers=False, local=True,
          touches_server=True, n2=True),
    Fault("malformed at acquire", _malformed_now, "refuse", phase="acquire", http=True),
    Fault("endless body at acquire", _endless_now, "refuse", phase="acquire", http=True),
]


# The servers whose clients speak a binary protocol of their own over TCP: the proxy's TCP-level
# modes (delay, blackhole, reset) apply to them, its HTTP replies do not.
NOT_HTTP = ("zookeeper", "postgres")


def faults_for(backend):
    def applies(f):
        if f.only:
            return backend in f.only
        if backend == "local":
            return f.local
        return f.servers and backend not in f.not_for and not (f.http and backend in NOT_HTTP)
    return [f for f in FAULTS if applies(f)]


# ---- one scenario --------------------------------------------------------------------------------

class Victim:
    def __init__(self, tag, proc):
        self.tag, self.proc = tag, proc
        self.section = None
        self.killed_at = None  # when the harness sent its lock SIGKILL


class Scenario:
    """Runs one fault on one backend with limit n until `quota` sections have been logged and
    the fault has been met at least once (again after every `gap` sections of the contenders);
    returns the checked Row."""

    def __init__(self, backend, fault, n, quota, workdir, lock=LOCK, contenders=3, think=0.1,
                 seed=1, gap=None):
        self.backend, self.fault, self.n, self.quota = backend, fault, n, quota
        self.workdir, self.lock = workdir, lock
        self.count, self.think, self.seed = contenders, think, seed
        self.gap = gap or quota  # the default: the fault once
        self.ttl = backend.ttl(fault.short)
        self.row = Row(backend.name, fault.name, n,
                       expected=expected_failure(backend.name, fault.name, n))
        self.windows = []     # (from, to) monotonic: the server renewed nothing then
        self.pauses = []      # (from, to) monotonic: the server was paused, and read nothing
        self.lags = []        # seconds from a session ended at the server to its child's end
        self.allowed = set()  # pids of children whose overlap is excused (checker.py)
        self.expect = {}      # victim's child pid -> "survive", "stop" or None
        self.deadlines = {}   # child pid -> lease deadline as the server saw it
        self.lost_slots = {}  # "dev:ino" of a slot file removed under its holder -> (when, fd)
        self.proxy = None
        self.ending_at = None  # when the harness began stopping every lock
        self.register = None   # the RegisterStore, with n = 1
        self.outcomes = {}    # what the victims did after a fault at acquisition -> how many times

    def problem(self, text):
        self.row.problems.append(text)

    def env(self):
        # libpq's own variables (PGHOST, PGPASSWORD...) go too: the flags say where the server is.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CONSUL_", "ETCDCTL_", "LOCK_", "ZOOKEEPER_", "PG"))}
        env["LOCK_STATE_DIR"] = getattr(self.backend, "dir", "/nonexistent")
        return env

    def run(self):
        began = time.monotonic()
        slug = "".join(c if c.isalnum() else "-" for c in self.fault.name).strip("-")
        log = os.path.join(self.workdir, f"{self.backend.name}-{slug}-n{self.n}.log")
        common = ["-n", str(self.n), "-shell=false"]
        target = self.backend.target()
        make_proxy = getattr(self.backend, "make_proxy", FaultProxy)
        # A register for mutual exclusion only: with n > 1, holders share it by design. Its
        # socket lives in a directory of its own, short enough for a unix socket's path.
        register = registers = None
        if self.n == 1:
            register_dir = tempfile.mkdtemp(prefix="lock-chaos-register-")
            try:
                register = self.register = RegisterStore(os.path.join(register_dir, "register"))
            except OSError:
                shutil.rmtree(register_dir, ignore_errors=True)
                raise
        try:
            with make_proxy(*target) if target else _Nothing() as proxy:
                self.proxy = proxy
                self.watcher = LogWatcher(log)
                self.watcher.start()
                self.crowd = Contenders(self.lock,
                                        self.backend.flags(short=self.fault.short) + common,
                                        f"chaos/{slug}-n{self.n}", log, self.env(), self.count,
                                        self.seed, self.think,
                                        register=register.path if register else None)
                self.contend(proxy, common)
        finally:
            if register:
                registers = register.stop()
                shutil.rmtree(register_dir, ignore_errors=True)
                for line in register.errors:
                    self.problem(f"malformed register request {line!r}")
        for line in self.watcher.malformed:
            self.problem(f"malformed log line {line!r}")
        if hasattr(self.backend, "leftovers"):
            left = self.backend.leftovers(self.crowd.prefix)
            if left:
                where = "in the state directory" if self.backend.name == "local" else "on the server"
                self.problem(f"left behind {where}: {left}")
        failures = self.crowd.failures
        if self.fault.server_wide:  # a holder's loss is the fault's doing, not a failed run
            failures = [f for f in failures if not f[2].startswith("lock: lock lost:")]
        failed = len(failures)
        if failed:
            said = failures[0][2].splitlines()[-1:] or ["(no message)"]
            text = (f"{failed} of {self.crowd.runs} contender runs failed, e.g. "
                    f"{failures[0][0]} exit {failures[0][1]}: "
                    f"{said[0][:300]!r}")
            # Only a fault the others meet too (on the server) may make their runs fail; a
            # victim's kill or pause may cost them a wait, never an error.
            (self.row.notes if self.fault.touches_server else self.row.problems).append(text)
        if self.lags:
            self.row.notes.append(f"child stopped {min(self.lags) * 1000:.0f} to "
                                  f"{max(self.lags) * 1000:.0f} ms after its session was ended")
        if self.outcomes:
            self.row.notes.append("after the cut: " + ", ".join(
                f"{what} {count}x" for what, count in sorted(self.outcomes.items())))
        self.excuse_lost_slots()
        check(self.row, self.watcher.sections, self.deadlines, self.allowed, self.expect,
              self.ending_at, self.fault.server_wide, registers)
        self.row.seconds = time.monotonic() - began
        return self.row

    def contend(self, proxy, common):
        """The contenders and the faults, until the quota is met; then every lock stopped (from
        self.ending_at on)."""
        self.victim_flags = self.backend.flags(
            self.backend.victim_address(proxy) if proxy else None, self.fault.short) + common
        try:
            self.crowd.start()
            self.cycles()
        finally:
            if proxy:
                proxy.set_mode("pass")
            self.ending_at = time.monotonic()
            for tag in self.crowd.stop(15 * SLOW):
                self.problem(f"{tag}'s lock did not exit within {15 * SLOW:.0f}s of SIGTERM")
            if not self.watcher.wait(lambda ss: not self.watcher.open_sections(), 10 * SLOW):
                self.problem("children still running after every lock was stopped")
            self.watcher.stop()

    def excuse_lost_slots(self):
        """A section that held a slot file removed under it (README.md: the path check notices
        within PATH_CHECK_PERIOD) may overlap newcomers; it must end within the limit all the
        same. Only one whose child started at about that instant, though: a `lock` that takes a
        slot in the removed directory later must notice before it starts a child."""
        limit = PATH_CHECK_PERIOD + 2.0 * SLOW
        for s in self.watcher.sections:
            if s.slot not in self.lost_slots:
                continue
            removed = self.lost_slots[s.slot][0]
            if s.start > removed + 0.5 * SLOW:
                continue
            self.allowed.add(s.pid)
            self.deadlines.setdefault(s.pid, removed)
            if s.end is not None and s.end > removed + limit:
                self.problem(f"a child still ran {s.end - removed:.1f}s after its state "
                             f"directory went: {s}")
        for _, fd in self.lost_slots.values():
            os.close(fd)
        self.lost_slots.clear()

    def status(self):
        """lock -status of the prefix, for a report of a hang."""
        try:
            r = subprocess.run([self.lock, *self.crowd.flags, "-status", self.crowd.prefix],
                               env=self.env(), capture_output=True, text=True, timeout=10 * SLOW)
            return f"exit {r.returncode}: {(r.stdout + r.stderr).strip()[:1000]!r}"
        except subprocess.TimeoutExpired:
            return "lock -status hung too"

    def cycles(self):
        """The fault, then the contenders' `gap` sections, until the quota is met."""
        cycle = 0
        while not ABORT.is_set():
            if self.fault.inject is not None:
                self.cycle(cycle)
                cycle += 1
            have = len(self.watcher.sections)
            if have >= self.quota:
                return
            want = min(self.quota, have + self.gap)
            # After a lost hold the others may wait out a TTL; beyond that, no progress is a hang.
            limit = (2 * (self.ttl or 0) + 60) * SLOW
            if not self.watcher.wait(lambda ss: len(ss) >= want or ABORT.is_set(), limit):
                self.problem(f"the contenders made no progress for {limit:.0f}s "
                             f"({len(self.watcher.sections)} of {want} sections): "
                             f"{self.crowd.snapshot()}; status: {self.status()}")
                return
            if want >= self.quota:
                return

    def cycle(self, i):
        if self.fault.phase == "acquire":
            (self.refusal if self.fault.expect == "refuse" else self.acquire_cycle)(i)
        else:
            self.victim_cycle(i)

    def start_victim(self, i, seconds, extra=()):
        if hasattr(self.backend, "before_victim"):
            self.backend.before_victim(self)
        tag = f"victim{i}"
        return Victim(tag, self.crowd.spawn(seconds, tag, [*self.victim_flags, *extra]))

    def victim_cycle(self, i):
        settle = self.backend.settle
        # A victim that must lose its hold gets a section too long to end by itself; one paused
        # beyond its TTL, a section that ends half a second before the pause does, long after
        # its lease deadline, so that a child still alive then writes from a stale read.
        if self.fault.ends_in_pause:
            seconds = settle + self.ttl + BEYOND_TTL - 0.5
        elif self.fault.expect == "stop" or self.fault.name.endswith("> TTL"):
            seconds = 120
        else:
            seconds = settle + self.fault.length + 1.5
        self.crowd.hold_off()  # the victim's turn comes once the runs already queued are done
        try:
            v = self.start_victim(i, seconds)
            found = self.watcher.wait(
                lambda ss: next((s for s in ss if s.tag == v.tag), None) or not alive(v.proc.pid),
                (30 + 2 * (self.ttl or 0)) * SLOW)
        finally:
            self.crowd.resume()  # and the others queue behind it, ready to take over
        if found is None or found is True:
            self.problem(f"{v.tag} never got its turn: {self.end_victim(v, 1)}")
            return
        v.section = found
        self.backend.watch(self, v)
        time.sleep(settle)  # the victim holds a while (renewals going) before the fault
        self.fault.inject(self, v)
        done = self.end_victim(v, (self.ttl or 0) * 2 + seconds + 20)
        if done is None:
            self.problem(f"{v.tag}'s lock neither ended nor stopped its child (killed)")
            return
        code, err, _ = done
        self.watcher.wait(lambda ss: v.section.end is not None, 10 * SLOW)
        deadline = self.backend.deadline(self, v)
        if deadline is not None:  # the fault may have set an earlier one (a node deleted)
            self.deadlines[v.section.pid] = min(deadline, self.deadlines.get(v.section.pid, deadline))
        self.expect[v.section.pid] = self.fault.expect if self.fault.expect in (
            "survive", "stop") else None
        said = err.strip().splitlines()
        if i == 0:
            self.row.notes.append(f"{v.tag}: child {v.section.how}, lock exit {code}")
        if self.fault.expect == "survive" and code != 0:
            self.problem(f"{v.tag}'s lock exited {code} though the fault should be ridden out: "
                         f"{said[-1:] or '(nothing)'}")
        if self.fault.expect == "stop" and code != 1:
            self.problem(f"{v.tag}'s lock exited {code} after losing its hold")
        if i == 0 and (self.fault.expect == "stop" or self.fault.ends_in_pause):
            self.row.notes.append(f"victim said {said[-1][:400] if said else '(nothing)'!r}")
        if self.fault.says and (len(said) != 1 or not said[0].startswith(self.fault.says)):
            self.row.messages.append(f"{v.tag}'s lock should have said one line beginning "
                                     f"{self.fault.says!r}; it said {err.strip()[:400]!r}")
        if len(said) > 3 or any(w in err for w in ("what()", "terminate called", "Sanitizer")):
            self.problem(f"{v.tag} said too much or crashed: {err.strip()[:300]!r}")

    def acquire_cycle(self, i):
        """A fault armed before the victim starts, aimed at its acquisition, that it must come
        through (see _cut_at_create): its section runs its course, lock exits 0, and while it
        holds, its session has one node. -verbose tells whether lock found the node whose
        create's answer was lost ("queued as" is said only of a node it made)."""
        self.fault.inject(self)
        try:
            self.crowd.hold_off()
            try:
                v = self.start_victim(i, self.backend.settle + 1.0, ["-verbose"])
                found = self.watcher.wait(
                    lambda ss: next((s for s in ss if s.tag == v.tag), None) or not alive(v.proc.pid),
                    (30 + 2 * (self.ttl or 0)) * SLOW)
            finally:
                self.crowd.resume()
            if found is None or found is True:
                self.problem(f"{v.tag} never got its turn: {self.end_victim(v, 1)}")
                return
            v.section = found
            nodes = self.backend.nodes_of(self, v)
            done = self.end_victim(v, (self.ttl or 0) * 2 + 20)
        finally:
            self.backend.frames.on_frame = None
        if len(nodes) != 1:
            self.problem(f"{v.tag}'s session held {len(nodes)} nodes where it should hold one: {nodes}")
        if not self.cuts:
            self.problem(f"{v.tag}: no create of its own node went through the proxy; nothing cut")
        if done is None:
            self.problem(f"{v.tag}'s lock neither ended nor stopped its child (killed)")
            return
        code, err, _ = done
        self.watcher.wait(lambda ss: v.section.end is not None, 10 * SLOW)
        self.expect[v.section.pid] = "survive"
        if code != 0:
            self.problem(f"{v.tag}'s lock exited {code} after a connection cut at its create: "
                         f"{err.strip().splitlines()[-1:] or '(nothing)'}")
        for kind, path in self.cuts:
            made = any("queued as " in line and path.rsplit("/", 1)[-1] in line
                       for line in err.splitlines())
            outcome = f"{kind} node {'made again' if made else 'found by its protection id'}"
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if any(w in err for w in ("what()", "terminate called", "Sanitizer")):
            self.problem(f"{v.tag} crashed: {err.strip()[-300:]!r}")

    def end_victim(self, v, timeout):
        """Waits for the victim's lock; kills it (and its tree, through its watchdog) at the
        timeout. Returns finish()'s answer, None for a kill."""
        done = finish(v.proc, timeout * SLOW)
        if done is None:  # not reaped yet, so the pid is still the victim's
            os.kill(v.proc.pid, signal.SIGCONT)
            os.kill(v.proc.pid, signal.SIGKILL)
            finish(v.proc, 10 * SLOW)
        self.crowd.forget(v.tag)
        return done

    def refusal(self, i):
        self.fault.inject(self)
        v = self.start_victim(i, 1.0)
        try:
            done = self.end_victim(v, 30)
        finally:
            self.proxy.set_mode("pass")
        if done is None:
            self.problem("lock hung on the bad reply (30s)")
            return
        code, err, rss = done
        lines = err.strip().splitlines()
        if self.watcher.section_of(v.tag):
            self.problem("the child started on a bad reply")
        if code != 1:
            self.problem(f"lock exited {code} on a bad reply")
        if len(lines) != 1 or any(w in err for w in ("stoll", "exception", "what()")):
            self.problem(f"not one plain line: {err.strip()[:300]!r}")
        if rss > 64 * 1024:
            self.problem(f"lock grew to {rss // 1024} MB on the bad reply")
        if i == 0:
            self.row.notes.append(f"victim said {lines[-1][:160] if lines else '(nothing)'!r}, "
                                  f"peak RSS {rss // 1024} MB")


class _Nothing:
    """`with` for a backend without a proxy."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        pass
