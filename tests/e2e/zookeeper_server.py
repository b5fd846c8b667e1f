"""A real ZooKeeper for the tests: Debian's ZooKeeper (3.8) on free loopback ports, in a temporary
directory, started and stopped by its own PID; one server (ZooKeeperServer) or three
(ZooKeeperEnsemble). Both are context managers, and their helpers look at the tree through a kazoo
client of their own, whose session the session helpers leave out.

Servers run with znode.container.checkIntervalMs=1000, so an emptied container node (the parents
Curator and lock create) goes within about a second instead of a minute; with maxClientCnxns=0,
since every client comes from 127.0.0.1 and the default allows 60 connections per address; and
with forceSync=no: no fsync per transaction, which a test does not need (a SIGKILLed server still
finds its writes in the page cache when it restarts).

tickTime defaults to ZooKeeper's own 2000 ms, so that sessions are granted what they would be in
production: between 2 and 20 ticks (4 s to 40 s) unless min/max_session_timeout say otherwise. A
test of session expiry can pass a smaller tick_time (the server expires sessions in buckets of one
tick, so expiry comes up to a tick after the timeout).

Timings on the 2-core test machine, lightly loaded: a server serves 0.6 to 1.0 s after its JVM
starts (58 MB resident); restart() 1 s, stop() 0.4 s; the ensemble elects a leader 2.8 to 3.2 s
after its three JVMs start, and a new one within 0.5 s of its leader's SIGKILL. Idle, they use
next to no CPU.

kazoo: Debian's python3-kazoo installs into /usr/lib/python3/dist-packages, which an interpreter
other than /usr/bin/python3 (say, pyenv's) does not search; kazoo is then looked for there too,
behind everything else on sys.path. missing() tells what the fixtures lack, for skipIf.
"""

import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from harness import SLOW, free_port, tail, wait_for

JAVA = shutil.which("java") or "/usr/bin/java"
JARS = "/usr/share/java"
# zookeeper.jar's manifest names the rest (jute, netty, metrics, ...); slf4j-simple logs to stderr.
SERVER_CLASSPATH = [f"{JARS}/zookeeper.jar", f"{JARS}/slf4j-simple.jar"]
# Small and quick to start: two cores, maybe a test suite beside it. C1 alone compiles less; the
# serial collector runs no GC threads in parallel; no hsperfdata file in /tmp.
JVM_FLAGS = ["-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
             "-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true",
             "-Dorg.slf4j.simpleLogger.showDateTime=true",
             "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"]
START_TIMEOUT = 60.0  # seconds (times SLOW); a start takes about 1 s on an idle machine
KAZOO_DIST = "/usr/lib/python3/dist-packages"
START_MARK = "--- lock tests: starting"  # a line in the log before each start


def kazoo_client_class():
    """kazoo's KazooClient, from Debian's dist-packages if this interpreter has no kazoo of its own."""
    try:
        from kazoo.client import KazooClient
    except ImportError:
        if KAZOO_DIST in sys.path or not os.path.isdir(os.path.join(KAZOO_DIST, "kazoo")):
            raise
        sys.path.append(KAZOO_DIST)
        from kazoo.client import KazooClient
    # It logs every dropped connection and expired session, which tests cause on purpose.
    log = logging.getLogger("kazoo")
    log.setLevel(logging.CRITICAL)
    if not log.handlers:
        log.addHandler(logging.NullHandler())
    return KazooClient


def kazoo_exceptions():
    """kazoo.exceptions, found where kazoo_client_class finds kazoo."""
    kazoo_client_class()
    import kazoo.exceptions
    return kazoo.exceptions


def missing():
    """What the ZooKeeper fixtures need and this machine lacks (None when nothing), for skipIf."""
    lacking = [p for p in (JAVA, *SERVER_CLASSPATH) if not os.path.exists(p)]
    try:
        kazoo_client_class()
    except ImportError:
        lacking.append("kazoo (python3-kazoo)")
    return "needs " + ", ".join(lacking) if lacking else None


def four_letter(port, word, timeout=2.0):
    """A four-letter-word command's answer ("" when none came: not listening, paused, closed)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(word.encode())
            s.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return b"".join(chunks).decode(errors="replace")
                chunks.append(chunk)
    except OSError:
        return ""


def server_mode(port, timeout=2.0):
    """"standalone", "leader" or "follower" from `srvr`, once the server serves; else None."""
    m = re.search(r"^Mode: (\w+)", four_letter(port, "srvr", timeout), re.M)
    return m.group(1) if m else None


class ZooKeeperProcess:
    """One JVM running one server: its configuration file, data directory and log, in `dir`."""

    def __init__(self, dir, main_class="org.apache.zookeeper.server.ZooKeeperServerMain",
                 jvm_properties=()):
        self.dir = dir
        self.cfg = os.path.join(dir, "zoo.cfg")
        self.data = os.path.join(dir, "data")
        self.log_path = os.path.join(dir, "zookeeper.log")
        self.main_class = main_class
        self.jvm_properties = list(jvm_properties)
        self.port = None
        self.proc = None
        self.log = None
        os.makedirs(self.data, exist_ok=True)

    def write_config(self, port, settings):
        self.port = port
        lines = [f"dataDir={self.data}", f"clientPort={port}", "clientPortAddress=127.0.0.1",
                 *(f"{k}={v}" for k, v in settings.items())]
        with open(self.cfg, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self):
        """Starts the JVM; does not wait for it to serve."""
        self.log = open(self.log_path, "a")
        self.log.write(f"{START_MARK} on port {self.port}\n")
        self.log.flush()
        self.proc = subprocess.Popen(
            [JAVA, *JVM_FLAGS, *self.jvm_properties, "-cp", ":".join(SERVER_CLASSPATH),
             self.main_class, self.cfg],
            cwd=self.dir, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def mode(self, timeout=2.0):
        return server_mode(self.port, timeout) if self.alive() else None

    def bind_failed(self):
        """Whether the last start failed to bind a port (a port picked as free was taken)."""
        last = tail(self.log_path, 400).rsplit(START_MARK, 1)[-1]
        return "Address already in use" in last

    def signal(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)

    def pause(self):
        self.signal(signal.SIGSTOP)

    def resume(self):
        self.signal(signal.SIGCONT)

    def kill(self):
        """SIGKILL: no goodbye to clients or peers."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGCONT)  # a stopped process dies of SIGKILL too, but
            os.kill(self.proc.pid, signal.SIGKILL)  # reaping it is quicker once it runs
        self._reap()

    def stop(self, timeout=10.0):
        """SIGTERM (after SIGCONT, in case a test left it paused); SIGKILL if that is not enough."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGCONT)
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
        self._reap()

    def _reap(self):
        if self.proc is not None:
            self.proc.wait()
        if self.log is not None:
            self.log.close()
            self.log = None


class _TreeHelpers:
    """A kazoo client of the fixture's own, and what tests ask of the tree through it. Needs
    self.connect_string and self._client."""

    def client(self):
        """The fixture's kazoo client, connected (it reconnects by itself after a restart)."""
        if self._client is None:
            client = kazoo_client_class()(
                self.connect_string, timeout=10.0,
                connection_retry=dict(max_tries=-1, delay=0.05, max_delay=0.5),
                command_retry=dict(max_tries=-1, delay=0.05, max_delay=0.5,
                                   deadline=30.0 * SLOW))
            client.start(timeout=30.0 * SLOW)
            self._client = client
        self._own_sessions.add(self._client.client_id[0] if self._client.client_id else 0)
        return self._client

    def _call(self, fn, *args, **kwargs):
        client = self.client()
        result = client.retry(getattr(client, fn), *args, **kwargs)
        if client.client_id:
            self._own_sessions.add(client.client_id[0])  # a new one after an expiry
        return result

    def children(self, path):
        """The names of a node's children, sorted; [] when the node does not exist."""
        NoNodeError = kazoo_exceptions().NoNodeError
        try:
            return sorted(self._call("get_children", path))
        except NoNodeError:
            return []

    def get(self, path):
        """(data, stat) of a node; stat has ephemeralOwner (its session, 0 if persistent or a
        container), czxid, mzxid, version, cversion, numChildren, ... Raises NoNodeError."""
        return self._call("get", path)

    def exists(self, path):
        """The node's stat, or None."""
        return self._call("exists", path)

    def delete(self, path, recursive=False):
        """Deletes a node (a test playing an operator or a crashed peer); gone already is fine."""
        NoNodeError = kazoo_exceptions().NoNodeError
        try:
            self._call("delete", path, recursive=recursive)
        except NoNodeError:
            pass

    def create(self, path, data=b"", **kwargs):
        """kazoo's create (ephemeral=, sequence=, makepath=, ...) on the fixture's own session."""
        return self._call("create", path, data, **kwargs)

    def tree(self, path="/"):
        """Every node below `path` (not /zookeeper), as {path: (data, stat)}."""
        out = {}

        def walk(p):
            if p == "/zookeeper":
                return
            got = self._get_or_none(p)
            if got is None:
                return
            out[p] = got
            for c in self.children(p):
                walk(p.rstrip("/") + "/" + c)

        walk(path)
        return out

    def _get_or_none(self, path):
        NoNodeError = kazoo_exceptions().NoNodeError
        try:
            return self.get(path)
        except NoNodeError:
            return None

    def close_client(self):
        if self._client is not None:
            client, self._client = self._client, None
            try:
                client.stop()
                client.close()
            except Exception:  # noqa: BLE001  (a dead server, an expired session: nothing to do)
                pass

    # The session tracker and the connections, as the server sees them (four-letter words).

    def dump(self):
        """The `dump` of the server that tracks every session (the leader in an ensemble)."""
        return four_letter(self.tracker_port(), "dump", timeout=5.0)

    def sessions(self):
        """Ids of the sessions the server tracks (live, or disconnected and not yet expired),
        besides the fixture's own."""
        text = self.dump()
        block = text.split("ephemeral nodes dump:")[0]
        ids = {int(m, 16) for m in re.findall(r"^\s+(0x[0-9a-f]+)\s*$", block, re.M)}
        return ids - self._own_sessions

    def session_count(self):
        return len(self.sessions())

    def ephemerals(self):
        """{session id: [paths of its ephemeral nodes]}, besides the fixture's own."""
        text = self.dump().split("ephemeral nodes dump:", 1)[-1].split("Connections dump:")[0]
        out, current = {}, None
        for line in text.splitlines():
            m = re.match(r"^(0x[0-9a-f]+):$", line)
            if m:
                current = int(m.group(1), 16)
                out[current] = []
            elif line.startswith("\t/") and current is not None:
                out[current].append(line.strip())
        return {k: v for k, v in out.items() if k not in self._own_sessions}

    def connections(self, port=None):
        """The server's client connections that have a session, besides the fixture's: dicts of
        `cons` fields as strings, with "sid" and "to" (the negotiated session timeout, ms) as
        ints. In an ensemble each server knows its own connections: pass its port."""
        out = []
        for line in four_letter(port or self.tracker_port(), "cons", timeout=5.0).splitlines():
            m = re.match(r"^\s*/([\d.:]+)\[\d+\]\((.*)\)\s*$", line)
            if not m:
                continue
            fields = dict(kv.split("=", 1) for kv in m.group(2).split(",") if "=" in kv)
            if "sid" not in fields:
                continue  # a connection without a session yet (like this very one)
            fields["sid"], fields["to"] = int(fields["sid"], 16), int(fields.get("to", 0))
            fields["address"] = m.group(1)
            if fields["sid"] not in self._own_sessions:
                out.append(fields)
        return out


class ZooKeeperServer(_TreeHelpers):
    """One server. tick_time, min/max_session_timeout (ms) go to zoo.cfg; the latter two let a test
    make the server grant less (or more) than a client asks; `settings` adds other zoo.cfg lines."""

    def __init__(self, tick_time=2000, min_session_timeout=None, max_session_timeout=None,
                 container_check_ms=1000, settings=None):
        self.dir = tempfile.mkdtemp(prefix="lock-zookeeper-")
        self.settings = {"tickTime": tick_time, "admin.enableServer": "false",
                         "4lw.commands.whitelist": "*", "maxClientCnxns": 0, "forceSync": "no",
                         "preAllocSize": 1024}  # KiB: the transaction log's growth step
        if min_session_timeout is not None:
            self.settings["minSessionTimeout"] = min_session_timeout
        if max_session_timeout is not None:
            self.settings["maxSessionTimeout"] = max_session_timeout
        self.settings.update(settings or {})
        self.server = ZooKeeperProcess(self.dir, jvm_properties=[
            f"-Dznode.container.checkIntervalMs={container_check_ms}",
            "-Dzookeeper.admin.enableServer=false"])
        self.log_path = self.server.log_path
        self.connect_string = None
        self.start_seconds = None  # how long the last start took, JVM to serving
        self._client = None
        self._own_sessions = set()

    @property
    def port(self):
        return self.server.port

    @property
    def pid(self):
        return self.server.proc.pid if self.server.proc else None

    def __enter__(self):
        try:
            for _ in range(5):  # a port picked as free may be taken before ZooKeeper binds it
                self.server.write_config(free_port(), self.settings)
                self.connect_string = f"127.0.0.1:{self.port}"
                if self._start():
                    return self
                if not self.server.bind_failed():
                    break
        except BaseException:
            self._cleanup(keep_log=True)
            raise
        self._cleanup(keep_log=True)
        raise RuntimeError(f"ZooKeeper did not start; see {self.log_path}")

    def __exit__(self, *exc):
        self._cleanup(keep_log=False)

    def _start(self):
        """Starts the JVM and waits until it serves; False if it died (say, of a port clash)."""
        began = time.monotonic()
        self.server.start()
        try:
            wait_for(lambda: not self.server.alive() or self.server.mode() == "standalone",
                     START_TIMEOUT, "ZooKeeper to start")
        except AssertionError as e:
            self.server.kill()
            raise RuntimeError(f"{e}; see {self.log_path}") from None
        if not self.server.alive():
            self.server.stop()
            return False
        self.start_seconds = time.monotonic() - began
        return True

    def _cleanup(self, keep_log):
        self.server.resume()
        self.close_client()
        self.server.stop()
        if keep_log:  # the log is what tells why a start failed; the data can go
            shutil.rmtree(self.server.data, ignore_errors=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def tracker_port(self):
        return self.port

    def pause(self):
        """SIGSTOP: the server stops answering, its connections stay open."""
        self.server.pause()

    def resume(self):
        self.server.resume()

    def kill(self):
        """SIGKILL; restart() brings it back with its data."""
        self.server.kill()

    def stop(self):
        """SIGTERM and wait."""
        self.server.stop()

    def restart(self):
        """Stops the server if it runs and starts it again: same port, same data (so sessions that
        have not expired and their ephemeral nodes come back with it)."""
        self.server.stop()
        if not self._start():
            raise RuntimeError(f"ZooKeeper did not restart on port {self.port}; see {self.log_path}")

    def alive(self):
        return self.server.alive()


class ZooKeeperEnsemble(_TreeHelpers):
    """Three servers (QuorumPeerMain) on loopback; ready when one leads and the others follow."""

    def __init__(self, size=3, tick_time=2000, container_check_ms=1000, settings=None):
        self.dir = tempfile.mkdtemp(prefix="lock-zookeeper-ensemble-")
        self.size = size
        self.settings = {"tickTime": tick_time, "initLimit": 10, "syncLimit": 5,
                         "admin.enableServer": "false", "4lw.commands.whitelist": "*",
                         "maxClientCnxns": 0, "forceSync": "no", "preAllocSize": 1024}
        self.settings.update(settings or {})
        # A peer that is down or not started yet is asked again after at most a second (instead
        # of backing off to 60 s), and a connection to it gives up after a second: elections
        # stay quick when the JVMs start far apart or a test kills one.
        props = [f"-Dznode.container.checkIntervalMs={container_check_ms}",
                 "-Dzookeeper.admin.enableServer=false",
                 "-Dzookeeper.fastleader.maxNotificationInterval=1000",
                 "-Dzookeeper.cnxTimeout=1000"]
        self.servers = []
        for i in range(1, size + 1):
            member = ZooKeeperProcess(os.path.join(self.dir, f"server{i}"),
                                      "org.apache.zookeeper.server.quorum.QuorumPeerMain", props)
            with open(os.path.join(member.data, "myid"), "w") as f:
                f.write(f"{i}\n")
            self.servers.append(member)
        self.connect_string = None
        self.start_seconds = None
        self._client = None
        self._own_sessions = set()

    def __enter__(self):
        try:
            for _ in range(3):  # port clashes: start over on other ports
                self._configure()
                began = time.monotonic()
                for s in self.servers:
                    s.start()
                try:
                    wait_for(lambda: self._settled(), START_TIMEOUT, "the ensemble to elect a leader")
                except AssertionError as e:
                    if not any(s.bind_failed() for s in self.servers):
                        raise RuntimeError(f"{e}; see the logs in {self.dir}/server*/") from None
                if self._ready():
                    self.start_seconds = time.monotonic() - began
                    return self
                for s in self.servers:
                    s.stop()
                if not any(s.bind_failed() for s in self.servers):
                    break
        except BaseException:
            self._cleanup(keep_logs=True)
            raise
        self._cleanup(keep_logs=True)
        raise RuntimeError(f"the ZooKeeper ensemble did not start; see the logs in {self.dir}/server*/")

    def __exit__(self, *exc):
        self._cleanup(keep_logs=False)

    def _configure(self):
        peers = {i: (free_port(), free_port()) for i in range(1, self.size + 1)}
        quorum = {f"server.{i}": f"127.0.0.1:{p}:{e}" for i, (p, e) in peers.items()}
        for s in self.servers:
            s.write_config(free_port(), {**self.settings, **quorum})
        self.connect_string = ",".join(f"127.0.0.1:{s.port}" for s in self.servers)

    def _settled(self):
        """Ready, or some server died (a port clash, say): either way, no use waiting."""
        return self._ready() or not all(s.alive() for s in self.servers)

    def _ready(self):
        modes = [s.mode() for s in self.servers]
        return modes.count("leader") == 1 and modes.count("follower") == self.size - 1

    def _cleanup(self, keep_logs):
        for s in self.servers:
            s.resume()
        self.close_client()
        for s in self.servers:
            s.stop()
        if keep_logs:
            for s in self.servers:
                shutil.rmtree(s.data, ignore_errors=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def modes(self):
        """Each server's `srvr` Mode (None for one that is down, paused or not serving)."""
        return [s.mode() for s in self.servers]

    def leader(self):
        """The index (0-based) of the server that leads now, or None."""
        modes = self.modes()
        return modes.index("leader") if "leader" in modes else None

    def wait_leader(self, timeout=30.0):
        """Waits until a leader serves with a quorum behind it; returns its index."""
        def settled():
            modes = self.modes()
            return "leader" in modes and modes.count("follower") + 1 > self.size // 2
        wait_for(settled, timeout, "a leader with a quorum")
        return self.leader()

    def tracker_port(self):
        """The leader's client port: its session tracker knows every global session."""
        i = self.leader()
        if i is None:
            i = self.wait_leader()
        return self.servers[i].port

    def kill(self, i):
        """SIGKILL server i (0-based)."""
        self.servers[i].kill()

    def stop(self, i):
        self.servers[i].stop()

    def pause(self, i):
        self.servers[i].pause()

    def resume(self, i):
        self.servers[i].resume()

    def start(self, i, wait=True):
        """Starts server i again (after kill or stop), same ports and data; with `wait`, until it
        serves again as leader or follower."""
        s = self.servers[i]
        if not s.alive():
            s.start()
        if wait:
            wait_for(lambda: not s.alive() or s.mode() in ("leader", "follower"), START_TIMEOUT,
                     f"server {i} to rejoin")
            if not s.alive():
                raise RuntimeError(f"server {i} did not restart; see {s.log_path}")

    def restart(self, i):
        self.servers[i].stop()
        self.start(i)
