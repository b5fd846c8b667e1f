"""Apache Curator as a peer of lock's ZooKeeper backend: curator_peer/CuratorPeer.java, compiled
once per version of its source and run with Debian's Curator 5.4.0 and ZooKeeper 3.8.0 jars.

FACTS, measured against a ZooKeeper 3.8.0 server with kazoo and the server's transaction log
(java -cp /usr/share/java/zookeeper.jar org.apache.zookeeper.server.persistence.TxnLogToolkit
-d <dataDir>/version-2/log.1); where a fact comes from Curator's bytecode (javap -c) it says so.
test_zookeeper_fixture checks the node names, data and owners.

InterProcessMutex on /p:
  * The lock node: /p/_c_<uuid>-lock-<seq>, created EPHEMERAL_SEQUENTIAL ("create2 ... ,true" in
    the log) on the path /p/_c_<uuid>-lock-. "_c_<uuid>-" is Curator's "protection" prefix (a
    random lower-case UUID, 8-4-4-4-12 hex; by Curator's documentation, it finds its node by it
    among the children when a create's answer was lost with the connection); <seq> is the server's 10-digit zero-padded sequence. Example:
    /p/_c_6e7cecdd-6c3a-4a97-9d34-b19bbc7df5cf-lock-0000000000.
  * Data: Curator's default, InetAddress.getLocalHost().getHostAddress() as ASCII text, no
    terminator: b"127.0.0.1" on this machine (its host name resolves to 127.0.0.1). Nothing reads
    it. ephemeralOwner: the holder's session id.
  * Parents: /p is created on demand as a CONTAINER ("createContainer /p" in the log). Curator
    tries the create first, gets NONODE (-101), creates the missing parents as containers and
    tries again; a contender that loses the race for a parent gets NODEEXISTS (-110) and goes on.
    Through the client API a container looks persistent (stat.ephemeralOwner 0: the server hides
    its marker); only the log or the behaviour shows it: with znode.container.checkIntervalMs=1000
    the server deleted the emptied /p ("deleteContainer /p", session 0x0) 0.2 to 1 s after the last
    release. The sequence is the parent's: a new /p starts again at 0000000000 (czxid keeps rising).
  * Order (bytecode, StandardLockInternalsDriver): the children of /p sorted as strings by what
    follows the last "lock-" in the name (the whole name if there is no "lock-"); the first holds;
    each other contender watches the child just before its own. Every child of /p is a contender.
  * Release: delete of the lock node; /p is left to the server.

InterProcessSemaphoreV2 on /s with 3 leases:
  * Containers /s, /s/locks and /s/leases. /s/locks is an InterProcessMutex of its own (nodes
    /s/locks/_c_<uuid>-lock-<seq>, ephemeral, data the address), held only while acquiring.
    /s/leases has one node per lease: /s/leases/_c_<uuid>-lease-<seq>, EPHEMERAL_SEQUENTIAL, data
    the address, ephemeralOwner the session. (Lease.getNodeName() gives the name without the path;
    CuratorPeer prints the whole path.)
  * Acquire (bytecode, internalAcquire1Lease): take the /s/locks mutex; create the lease node;
    getChildren(/s/leases) with a watch, again on every change, until it has at most max_leases
    children; release /s/locks. Measured: while a fourth contender waits, /s/leases has 4 children
    (its lease node is already there) and its lock node stays in /s/locks. A timed-out acquire
    deletes its lease node and releases /s/locks. Every child of /s/leases counts, whatever its name.
  * /s/locks goes (deleteContainer) about a second after an acquisition even while leases are
    held; /s/leases and then /s go one container check apart once all leases are gone.

Sessions (tickTime 2000, so the server grants 4000..40000 ms): asking 10000 ms gets 10000 (Curator
and kazoo alike); 60000 (Curator's default) gets 40000; 1000 gets 4000: the server clamps, it does
not refuse. CuratorPeer asks 10000 unless told otherwise.

Logs: a rounds run appends "enter curator-<pid>" after each acquire and "exit curator-<pid>"
before each release, one write(2) each to a file opened with O_APPEND: the lines the e2e tests'
shell children write ('echo "enter $ID" >> "$LOG"'), so lock's and Curator's sections can share
one log, and harness.max_overlap checks it.

Timings on the 2-core test machine (lightly loaded): javac of the driver 1.7 s, once (classes kept
in <build dir>/curator_peer/<hash of the source>/); a CuratorHolder's JVM start to "acquired"
0.6 s; a rounds peer, 5 ms holds: 3 peers x 10 rounds of the mutex in 1.7 s.
"""

import hashlib
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

from harness import LOCK, SLOW

JAVA = shutil.which("java") or "/usr/bin/java"
JAVAC = shutil.which("javac") or "/usr/bin/javac"
JARS = "/usr/share/java"
# curator-recipes.jar's manifest names framework, client, guava, zookeeper and jute, and
# zookeeper.jar's the rest; slf4j-nop silences Curator and the ZooKeeper client.
CLASSPATH = [f"{JARS}/curator-recipes.jar", f"{JARS}/slf4j-nop.jar"]
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "curator_peer", "CuratorPeer.java")
JVM_FLAGS = ["-Xmx64m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC",
             "-XX:-UsePerfData"]

_classes = None


def missing():
    """What the Curator peer needs and this machine lacks (None when nothing), for skipIf."""
    lacking = [p for p in (JAVA, JAVAC, *CLASSPATH) if not os.path.exists(p)]
    return "needs " + ", ".join(lacking) if lacking else None


def _cache_root():
    """Beside the lock binary under test (the build directory owns it), else in /tmp."""
    if os.environ.get("CURATOR_PEER_DIR"):
        return os.environ["CURATOR_PEER_DIR"]
    build = os.path.dirname(os.path.abspath(LOCK))
    if os.path.isdir(build) and os.access(build, os.W_OK):
        return os.path.join(build, "curator_peer")
    return os.path.join(tempfile.gettempdir(), f"lock-curator-peer-{os.getuid()}")


def classes():
    """The directory of the compiled driver; compiles it the first time a source is seen. Safe
    when test processes race: each compiles into a directory of its own, the first rename wins."""
    global _classes
    if _classes:
        return _classes
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    root = _cache_root()
    final = os.path.join(root, digest)
    if not os.path.exists(os.path.join(final, "CuratorPeer.class")):
        os.makedirs(root, exist_ok=True)
        scratch = tempfile.mkdtemp(prefix=".javac-", dir=root)
        try:
            r = subprocess.run([JAVAC, "-J-XX:TieredStopAtLevel=1", "-J-XX:-UsePerfData", "-nowarn",
                                "-Xlint:-path", "-d", scratch, "-cp", ":".join(CLASSPATH), SOURCE],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=120 * SLOW)
            if r.returncode != 0:
                raise RuntimeError(f"javac {SOURCE} failed:\n{r.stdout}{r.stderr}")
            try:
                os.rename(scratch, final)
            except OSError:  # another test process got there first
                pass
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    _classes = final
    return final


def command(connect, *args, session_ms=10000):
    """The command line of a CuratorPeer (see curator_peer/CuratorPeer.java for `args`)."""
    return [JAVA, *JVM_FLAGS, f"-Dpeer.sessionMs={session_ms}",
            "-cp", ":".join([classes(), *CLASSPATH]), "CuratorPeer", connect, *map(str, args)]


def start_mutex(connect, path, rounds, hold_ms, log, session_ms=10000, **popen):
    """Starts `rounds` acquisitions of InterProcessMutex(path), logged to `log`; returns the
    Popen (stderr piped, text). Exit 0 when all rounds are done."""
    return _start_rounds(command(connect, "mutex", path, rounds, hold_ms, log,
                                 session_ms=session_ms), popen)


def start_semaphore(connect, path, leases, rounds, hold_ms, log, session_ms=10000, **popen):
    """As start_mutex, for InterProcessSemaphoreV2(path, leases)."""
    return _start_rounds(command(connect, "semaphore", path, leases, rounds, hold_ms, log,
                                 session_ms=session_ms), popen)


def _start_rounds(cmd, popen):
    popen.setdefault("stdin", subprocess.DEVNULL)
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(cmd, text=True, **popen)


class CuratorHolder:
    """A CuratorPeer in hold mode: acquires once (a mutex, or with `leases` a semaphore lease)
    and holds until release() (its stdin closed) or terminate() (SIGTERM); both give it back
    and end the session. kill() and pause() leave the node to the session's timeout. A context
    manager; on exit the JVM is gone, killed by its PID if it was still there."""

    def __init__(self, connect, path, leases=None, session_ms=10000):
        self.path = path
        args = ["hold", "mutex", path] if leases is None else ["hold", "semaphore", path, leases]
        self.cmd = command(connect, *args, session_ms=session_ms)
        self.proc = None
        self.node = None             # path of the lock or lease node, once acquired
        self.session = None          # its session id (int)
        self.session_timeout = None  # negotiated, ms
        self.started = None
        self.acquired_after = None   # seconds from the JVM's start to "acquired"
        self._buffer = b""
        self._lines = []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGKILL)
        self._close()

    def start(self):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, bufsize=0)
        return self

    def _read_lines(self, timeout):
        """Collects what stdout has, waiting up to `timeout` for more; False at its end."""
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], max(timeout, 0))
        if not ready:
            return True
        chunk = os.read(fd, 4096)
        if not chunk:
            return False
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        self._lines += [line.decode() for line in lines]
        return True

    def _saw(self, word):
        for line in self._lines:
            fields = line.split()
            if fields and fields[0] == word:
                return fields
        return None

    def acquired(self):
        """Whether it holds, without waiting."""
        if self.node is None and self.proc.poll() is None:
            self._read_lines(0)
        return self._parse_acquired()

    def _parse_acquired(self):
        fields = self._saw("acquired")
        if fields and self.node is None:
            self.node = fields[1]
            self.session = int(fields[2], 16)
            self.session_timeout = int(fields[3])
            self.acquired_after = time.monotonic() - self.started
        return self.node is not None

    def wait_acquired(self, timeout=30.0):
        """Waits until it holds; fails (AssertionError, with its stderr) if it ends or the
        deadline passes first."""
        deadline = time.monotonic() + timeout * SLOW
        while not self._parse_acquired():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {timeout * SLOW:.1f}s waiting for the "
                                     f"Curator holder to acquire {self.path}")
            if not self._read_lines(min(left, 0.5)):
                raise AssertionError(f"the Curator holder ended before acquiring: {self.finish()}")
        return self

    def release(self, timeout=20.0):
        """Closes its stdin: it releases, ends its session and exits. Returns the exit status."""
        self.proc.stdin.close()
        return self.finish(timeout)[0]

    def terminate(self, timeout=20.0):
        """SIGTERM: it releases in a shutdown hook. Returns the exit status: 143, as the JVM
        always exits after SIGTERM."""
        os.kill(self.proc.pid, signal.SIGTERM)
        return self.finish(timeout)[0]

    def kill(self):
        """SIGKILL: the node stays until the server expires the session."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def finish(self, timeout=20.0):
        """Waits for it to exit; returns (status, stdout lines, stderr)."""
        deadline = time.monotonic() + timeout * SLOW
        while self._read_lines(max(0.0, min(0.5, deadline - time.monotonic()))):
            if time.monotonic() > deadline:
                raise AssertionError(f"the Curator holder did not exit within {timeout * SLOW:.1f}s")
        status = self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        err = self.proc.stderr.read().decode(errors="replace")
        self._parse_acquired()
        return status, list(self._lines), err

    def _close(self):
        if self.proc:
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                try:
                    f.close()
                except (OSError, ValueError):
                    pass
