"""Three-member clusters whose members each live in a network namespace of their own (netns.py),
and contenders that run `lock` in namespaces of their own: what the partition tests cut apart.

Members listen on their own address and on 127.0.0.1 of their namespace (so that they can still
be asked from inside it while cut off), on fixed ports: every namespace has its own ports, so
nothing can clash. Every server is started with a
parent-death signal, so that a test process killed outright (no cleanup runs then) takes its
servers with it; netns.sweep_dead_runs() removes the namespaces on the next run.

Both are context managers: on exit every member is stopped (SIGCONT, SIGTERM, SIGKILL after 10 s)
and its directory removed, whatever happened.
"""

import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "e2e")]

from contenders import Contenders  # noqa: E402
from etcd_server import ETCD  # noqa: E402
from harness import SLOW  # noqa: E402
from netns import scratch_dir  # noqa: E402
from zookeeper_server import (JAVA, JVM_FLAGS, SERVER_CLASSPATH, START_MARK,  # noqa: E402
                              ZooKeeperProcess, tail)

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def die_with_us():
    """preexec_fn: SIGKILL this process when the thread that started it ends (it survives the
    exec of `ip netns exec`, which runs the server in the same process)."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def wait_until(condition, timeout, step=0.05):
    """Polls condition until it returns something truthy (returned) or the timeout passes
    (None)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(step)


def stop_process(proc, timeout=10.0):
    if proc is None:
        return
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGCONT)
            os.kill(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---- etcd ------------------------------------------------------------------------------------

class EtcdMember:
    CLIENT, PEER = 2379, 2380

    def __init__(self, node, dir):
        self.node, self.name, self.dir = node, node.name, dir
        self.proc = None
        self.log = None
        os.makedirs(dir, exist_ok=True)

    @property
    def url(self):
        return f"http://{self.node.ip}:{self.CLIENT}"

    @property
    def peer_url(self):
        return f"http://{self.node.ip}:{self.PEER}"

    def start(self, initial_cluster, token):
        self.log = open(os.path.join(self.dir, "etcd.log"), "a")
        self.proc = subprocess.Popen(
            [*self.node.exec(), ETCD, "--name", self.name, "--data-dir",
             os.path.join(self.dir, "data"),
             # 127.0.0.1 too: the member can be asked from inside its namespace while cut off.
             "--listen-client-urls", f"{self.url},http://127.0.0.1:{self.CLIENT}",
             "--advertise-client-urls", self.url,
             "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
             "--initial-cluster", initial_cluster, "--initial-cluster-state", "new",
             "--initial-cluster-token", token],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            preexec_fn=die_with_us)

    def stop(self):
        stop_process(self.proc)
        if self.log:
            self.log.close()
            self.log = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def call(self, path, body, timeout=1.0):
        """One JSON gateway call; None when the member does not answer (cut off, electing)."""
        req = urllib.request.Request(self.url + path, json.dumps(body).encode(), method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.load(r)
        except (OSError, ValueError):
            return None

    def status(self):
        """(own member id, the leader it knows) or None."""
        s = self.call("/v3/maintenance/status", {})
        if not s or "header" not in s:
            return None
        return int(s["header"]["member_id"]), int(s.get("leader", 0))

    def healthy(self):
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1.0) as r:
                return json.load(r).get("health") == "true"
        except (OSError, ValueError):
            return False


class EtcdCluster:
    name = "etcd"
    client_port = EtcdMember.CLIENT

    def __init__(self, net, names=("e1", "e2", "e3"), first=11):
        self.net = net
        self.dir = scratch_dir("etcd")
        self.members = [EtcdMember(net.add(n, first + i), os.path.join(self.dir, n))
                        for i, n in enumerate(names)]
        self.ids = {}  # member id -> member

    def __enter__(self):
        try:
            spec = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
            token = f"lock-partition-{os.getpid()}-{time.monotonic_ns()}"
            for m in self.members:
                m.start(spec, token)
            if not wait_until(lambda: self.settled() or not all(m.alive() for m in self.members),
                              60 * SLOW, 0.1) or not all(m.alive() for m in self.members):
                raise RuntimeError("the etcd cluster did not elect a leader: "
                                   + self.logs())
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for m in self.members:
            m.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self):
        return " | ".join(f"{m.name}: {tail(os.path.join(m.dir, 'etcd.log'), 5)!r}"
                          for m in self.members)

    def leader_of(self, members):
        """The member that `members` all follow (one of them), or None while they disagree or
        one does not answer."""
        seen = set()
        for m in members:
            st = m.status()
            if st is None:
                return None
            self.ids[st[0]] = m
            seen.add(st[1])
        if len(seen) != 1:
            return None
        leader = self.ids.get(seen.pop())
        return leader if leader in members else None

    def settled(self):
        """Every member answers, healthy, and all follow one leader: that leader, or None."""
        leader = self.leader_of(self.members)
        return leader if leader and all(m.healthy() for m in self.members) else None

    def wait_settled(self, timeout=60.0):
        leader = wait_until(self.settled, timeout * SLOW, 0.1)
        if not leader:
            raise AssertionError(f"the etcd cluster did not settle within {timeout * SLOW:.0f}s")
        return leader

    def endpoints(self, members):
        return ",".join(m.url for m in members)

    def flags(self, members):
        return ["-backend", "etcd", "-endpoints", self.endpoints(members)]

    def granted_ttl(self, section, member):
        """The victim's lease's granted TTL (its key ends in the lease ID, in hex)."""
        lease = int(section.lease.rsplit("/", 1)[-1], 16)
        got = member.call("/v3/lease/timetolive", {"ID": str(lease)}, timeout=2.0)
        return float(got["grantedTTL"]) if got and "grantedTTL" in got else None


# ---- ZooKeeper -------------------------------------------------------------------------------

def four_letter(host, port, word, timeout=2.0):
    """A four-letter word's answer ("" when none came)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
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


class ZkMember(ZooKeeperProcess):
    """A QuorumPeerMain in a namespace; its client port on every address of that namespace."""
    CLIENT, QUORUM, ELECTION = 2181, 2888, 3888

    def __init__(self, node, dir, jvm_properties):
        super().__init__(dir, "org.apache.zookeeper.server.quorum.QuorumPeerMain", jvm_properties)
        self.node, self.name = node, node.name

    def write_config(self, port, settings):
        self.port = port
        lines = [f"dataDir={self.data}", f"clientPort={port}", "clientPortAddress=0.0.0.0",
                 *(f"{k}={v}" for k, v in settings.items())]
        with open(self.cfg, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self):
        self.log = open(self.log_path, "a")
        self.log.write(f"{START_MARK} in {self.node.ns}\n")
        self.log.flush()
        self.proc = subprocess.Popen(
            [*self.node.exec(), JAVA, *JVM_FLAGS, *self.jvm_properties,
             "-cp", ":".join(SERVER_CLASSPATH), self.main_class, self.cfg],
            cwd=self.dir, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            preexec_fn=die_with_us)

    def mode(self, timeout=2.0):
        if not self.alive():
            return None
        m = re.search(r"^Mode: (\w+)", four_letter(self.node.ip, self.port, "srvr", timeout), re.M)
        return m.group(1) if m else None

    @property
    def address(self):
        return f"{self.node.ip}:{self.CLIENT}"

    def connections(self):
        """This server's client connections with a session: [{"sid": int, "to": ms, "ip": ..}]."""
        out = []
        for line in four_letter(self.node.ip, self.port, "cons", timeout=5.0).splitlines():
            m = re.match(r"^\s*/([\d.]+):\d+\[\d+\]\((.*)\)\s*$", line)
            if not m:
                continue
            fields = dict(kv.split("=", 1) for kv in m.group(2).split(",") if "=" in kv)
            if "sid" in fields:
                out.append({"sid": int(fields["sid"], 16), "to": int(fields.get("to", 0)),
                            "ip": m.group(1)})
        return out


class ZooKeeperCluster:
    """Three servers ticking every `tick_time` ms: with 500, a 5 s session is granted as asked, a
    follower gives up on a silent leader after syncLimit (5) ticks, 2.5 s, and a session expires
    at most a tick after its timeout."""
    name = "zookeeper"
    client_port = ZkMember.CLIENT

    def __init__(self, net, names=("z1", "z2", "z3"), first=11, tick_time=500):
        self.net = net
        self.dir = scratch_dir("zookeeper")
        # As in ZooKeeperEnsemble: a peer that is down is asked again within a second, and a
        # connection to one gives up after a second, so elections stay quick with one cut off.
        props = ["-Dznode.container.checkIntervalMs=1000", "-Dzookeeper.admin.enableServer=false",
                 "-Dzookeeper.fastleader.maxNotificationInterval=1000",
                 "-Dzookeeper.cnxTimeout=1000"]
        self.members = []
        for i, n in enumerate(names, 1):
            member = ZkMember(net.add(n, first + i - 1), os.path.join(self.dir, n), props)
            with open(os.path.join(member.data, "myid"), "w") as f:
                f.write(f"{i}\n")
            self.members.append(member)
        settings = {"tickTime": tick_time, "initLimit": 10, "syncLimit": 5,
                    "admin.enableServer": "false", "4lw.commands.whitelist": "*",
                    "maxClientCnxns": 0, "forceSync": "no", "preAllocSize": 1024}
        settings.update({f"server.{i}": f"{m.node.ip}:{ZkMember.QUORUM}:{ZkMember.ELECTION}"
                         for i, m in enumerate(self.members, 1)})
        for m in self.members:
            m.write_config(ZkMember.CLIENT, settings)

    def __enter__(self):
        try:
            for m in self.members:
                m.start()
            if not wait_until(lambda: self.settled() or not all(m.alive() for m in self.members),
                              60 * SLOW, 0.1) or not all(m.alive() for m in self.members):
                raise RuntimeError("the ZooKeeper ensemble did not elect a leader: " + self.logs())
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for m in self.members:
            m.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self):
        return " | ".join(f"{m.name}: {tail(m.log_path, 5)!r}" for m in self.members)

    def leader_of(self, members):
        """The member leading a quorum among `members`, or None."""
        modes = [m.mode() for m in members]
        if "leader" not in modes or modes.count("follower") + 1 <= len(self.members) // 2:
            return None
        return members[modes.index("leader")]

    def settled(self):
        """One leader and every other member following it: the leader, or None."""
        modes = [m.mode() for m in self.members]
        if modes.count("leader") == 1 and modes.count("follower") == len(self.members) - 1:
            return self.members[modes.index("leader")]
        return None

    def wait_settled(self, timeout=60.0):
        leader = wait_until(self.settled, timeout * SLOW, 0.1)
        if not leader:
            raise AssertionError(f"the ZooKeeper ensemble did not settle within "
                                 f"{timeout * SLOW:.0f}s: modes {[m.mode() for m in self.members]}")
        return leader

    def endpoints(self, members):
        return ",".join(m.address for m in members)

    def flags(self, members):
        return ["-backend", "zookeeper", "-endpoints", self.endpoints(members)]

    def granted_ttl(self, section, member):
        """The timeout the server granted the victim's session ($LOCK_SESSION, in hex)."""
        sid = int(section.lease, 16)
        for c in member.connections():
            if c["sid"] == sid and c["to"] > 0:
                return c["to"] / 1000.0
        return None


# ---- contenders ------------------------------------------------------------------------------

class NsContenders(Contenders):
    """Contenders.Contenders, each run of `lock` in its tag's namespace (`where`: tag -> Node)
    and with its tag's flags (`flags_by_tag`, else the shared ones)."""

    def __init__(self, *args, where, flags_by_tag=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.where = where
        self.flags_by_tag = flags_by_tag or {}

    def command(self, seconds, tag, flags=None, spawned=0.0):
        if flags is None:
            flags = self.flags_by_tag.get(tag)
        return [*self.where[tag].exec(), *super().command(seconds, tag, flags, spawned)]
