"""A private network of namespaces for partition tests: one namespace per node (a server member or
a client), each joined by a veth pair to a bridge in a hub namespace of its own, and one more veth
pair from the root namespace into the hub, so that the test process itself reaches every node
(10.77.<subnet>.1 is its address there). A node is cut off by setting its port on the bridge down:
as with a pulled cable, neither side is told, its packets are dropped, and its peers' sockets stay
open until their own timeouts.

Nothing here touches the root namespace but the one veth and its /24: no forwarding, no NAT, no
route beyond the subnet. Names carry the creating process's pid (namespaces lkpart-<pid hex>-...,
the root veth lkp<pid hex><label letter>), so that runs side by side do not collide, and so that
a run that was killed outright (SIGKILL leaves no chance to clean up) can be recognised: the next
Network deletes what a dead pid left. Subnets are picked under a file lock, among those no address
or route of this machine uses.
"""

import fcntl
import ipaddress
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

IP = shutil.which("ip") or "/usr/sbin/ip"
NS_PREFIX = "lkpart-"
NS_DIR = "/run/netns"
ROOT_VETH = re.compile(r"^lkp([0-9a-f]+)[a-z]$")
OWNED_NS = re.compile(r"^" + re.escape(NS_PREFIX) + r"([0-9a-f]+)-")
LOCK_FILE = ("/run/lock/lock-tests-netns.lock" if os.path.isdir("/run/lock")
             else "/tmp/lock-tests-netns.lock")
SUPERNET = ipaddress.ip_network("10.77.0.0/16")
SCRATCH = re.compile(r"^lock-partition-[a-z]+-([0-9a-f]+)-")


class IpError(RuntimeError):
    pass


def ip(*args, timeout=10.0, check=True):
    """One `ip` command; its stdout. An error names the command and what ip said."""
    r = subprocess.run([IP, *args], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise IpError(f"ip {' '.join(args)}: {r.stderr.strip() or f'exit {r.returncode}'}")
    return r.stdout


_unavailable = None


def unavailable():
    """Why namespaces cannot be made here (a message for skipTest), or None when they can: tried
    once per process by making a namespace with a bridge and a veth pair, and deleting it."""
    global _unavailable
    if _unavailable is not None:
        return _unavailable or None
    if os.geteuid() != 0:
        _unavailable = "network namespaces need root"
    elif not os.access(IP, os.X_OK):
        _unavailable = "network namespaces need ip (iproute2)"
    else:
        probe = f"{NS_PREFIX}{os.getpid():x}-probe-{uuid.uuid4().hex[:6]}"
        try:
            ip("netns", "add", probe)
            try:
                ip("-n", probe, "link", "add", "name", "br0", "type", "bridge")
                ip("-n", probe, "link", "add", "name", "va", "type", "veth", "peer", "name", "vb")
                _unavailable = ""
            finally:
                ip("netns", "del", probe, check=False)
        except (IpError, OSError, subprocess.TimeoutExpired) as e:
            _unavailable = f"cannot make network namespaces here: {e}"
    return _unavailable or None


def scratch_dir(what):
    """A temporary directory whose name carries this process's pid, for sweep_dead_runs()."""
    return tempfile.mkdtemp(prefix=f"lock-partition-{what}-{os.getpid():x}-")


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_dead_runs():
    """Deletes the namespaces, root veths and scratch directories of runs whose process is gone,
    and returns their names. Their processes are not looked for: the servers died with the run
    (a parent-death signal), and a lock whose server is gone stops its child and exits by itself."""
    gone = []
    try:
        names = os.listdir(NS_DIR)
    except FileNotFoundError:
        names = []
    for name in names:
        m = OWNED_NS.match(name)
        if m and not _pid_alive(int(m.group(1), 16)):
            ip("netns", "del", name, check=False)
            gone.append(name)
    for line in ip("-o", "link", "show").splitlines():
        m = re.match(r"^\d+:\s+([^:@]+)", line)
        if m:
            dev = m.group(1)
            owner = ROOT_VETH.match(dev)
            if owner and not _pid_alive(int(owner.group(1), 16)):
                ip("link", "del", dev, check=False)
                gone.append(dev)
    top = tempfile.gettempdir()
    for name in os.listdir(top):
        m = SCRATCH.match(name)
        if m and not _pid_alive(int(m.group(1), 16)):
            shutil.rmtree(os.path.join(top, name), ignore_errors=True)
            gone.append(name)
    return gone


def _subnets_in_use():
    """Every IPv4 network this machine's root namespace has an address or a route in."""
    used = []
    for line in ip("-4", "-o", "addr", "show").splitlines():
        m = re.search(r"\binet (\S+)", line)
        if m:
            used.append(ipaddress.ip_interface(m.group(1)).network)
    for line in ip("-4", "route", "show", "table", "all").splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("default", "broadcast", "local", "unreachable", "blackhole", "prohibit"):
            first = line.split()[1] if len(line.split()) > 1 else ""
        try:
            used.append(ipaddress.ip_network(first, strict=False))
        except ValueError:
            continue
    return [n for n in used if n.prefixlen > 0]


class Node:
    """One namespace on the network: `ns` its name, `ip` its address, `port` its link on the
    bridge (in the hub namespace)."""

    def __init__(self, net, name, ns, address, port):
        self.net, self.name, self.ns, self.ip, self.port = net, name, ns, address, port

    def exec(self):
        """The command prefix that runs a program in this namespace (the same process: ip execs)."""
        return [IP, "netns", "exec", self.ns]

    def run(self, *args, timeout=10.0):
        return subprocess.run([*self.exec(), *args], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def can_connect(self, address, port, timeout=3.0):
        """Whether a TCP connection from this namespace to address:port is accepted now."""
        try:
            return self.run("bash", "-c", f"exec 3<>/dev/tcp/{address}/{port}",
                            timeout=timeout).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def __repr__(self):
        return f"Node({self.name} {self.ip} in {self.ns})"


class Network:
    """The context manager: on exit (a failure, ^C, a SIGTERM turned into an exception) it deletes
    every namespace and veth it made, whatever state they are in. Stop the processes running in
    the namespaces first: a namespace lives on while a process is in it."""

    def __init__(self, label):
        assert re.fullmatch(r"[a-z][a-z0-9]{0,7}", label), label
        self.label = label
        self.run_id = f"{os.getpid():x}"
        self.hub = f"{NS_PREFIX}{self.run_id}-{label}-hub"
        self.root_veth = f"lkp{self.run_id}{label[0]}"
        self.nodes = {}
        self.made_ns = []
        self.every_ns = []  # every namespace made, for leftovers() after close()
        self.made_root_veth = False
        self.subnet = None
        self.swept = []
        self.cuts = set()  # ("port", node) and ("route", from, to) in force

    def __enter__(self):
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _create(self):
        with open(LOCK_FILE, "a") as lockf:
            # Two runs choosing a subnet at once would pick the same one.
            fcntl.flock(lockf, fcntl.LOCK_EX)
            self.swept = sweep_dead_runs()
            self.subnet = self._free_subnet()
            self._add_ns(self.hub)
            ip("-n", self.hub, "link", "add", "name", "br0", "type", "bridge")
            ip("-n", self.hub, "link", "set", "br0", "up")
            ip("link", "add", "name", self.root_veth, "type", "veth", "peer", "name", "p-root",
               "netns", self.hub)
            self.made_root_veth = True
            ip("-n", self.hub, "link", "set", "p-root", "master", "br0", "up")
            ip("addr", "add", f"{self.host(1)}/24", "dev", self.root_veth)
            ip("link", "set", self.root_veth, "up")

    def _free_subnet(self):
        used = _subnets_in_use()
        start = os.getpid() % 250
        for k in range(250):
            candidate = ipaddress.ip_network(f"10.77.{(start + k) % 250 + 1}.0/24")
            if not any(candidate.overlaps(n) for n in used):
                return candidate
        raise RuntimeError(f"no free /24 in {SUPERNET} for a test network")

    def host(self, k):
        return str(self.subnet.network_address + k)

    def _add_ns(self, name):
        ip("netns", "add", name)
        self.made_ns.append(name)
        self.every_ns.append(name)
        ip("-n", name, "link", "set", "lo", "up")

    def add(self, name, k):
        """A node in a namespace of its own with address .k (k from 10 on: .1 is ours)."""
        assert re.fullmatch(r"[a-z][a-z0-9]{0,9}", name) and 10 <= k < 255, (name, k)
        assert name not in self.nodes, name
        ns = f"{NS_PREFIX}{self.run_id}-{self.label}-{name}"
        port = f"p-{name}"
        self._add_ns(ns)
        ip("link", "add", "name", "eth0", "netns", ns, "type", "veth", "peer", "name", port,
           "netns", self.hub)
        ip("-n", self.hub, "link", "set", port, "master", "br0", "up")
        ip("-n", ns, "addr", "add", f"{self.host(k)}/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        node = Node(self, name, ns, self.host(k), port)
        self.nodes[name] = node
        return node

    def cut(self, *nodes):
        """Cuts each node off from every other one (and from us); returns when the last link went
        down, on the monotonic clock: nothing from these nodes crosses the bridge after that."""
        for node in nodes:
            ip("-n", self.hub, "link", "set", node.port, "down")
            self.cuts.add(("port", node.name))
        return time.monotonic()

    def cut_between(self, a, b):
        """Cuts the path between two nodes alone, both ways; each keeps every other peer. Their
        links share one bridge, so this is a blackhole route in each: what either sends to the
        other is dropped before it leaves (a connection in progress sees nothing come back, a new
        one cannot be made). Returns when both routes are in place, on the monotonic clock."""
        for x, y in ((a, b), (b, a)):
            ip("-n", x.ns, "route", "add", "blackhole", f"{y.ip}/32")
            self.cuts.add(("route", x.name, y.name))
        return time.monotonic()

    def heal(self):
        """Undoes every cut; returns when the last one is undone, on the monotonic clock."""
        for cut in sorted(self.cuts):
            if cut[0] == "port":
                ip("-n", self.hub, "link", "set", self.nodes[cut[1]].port, "up")
            else:
                x, y = self.nodes[cut[1]], self.nodes[cut[2]]
                ip("-n", x.ns, "route", "del", "blackhole", f"{y.ip}/32")
            self.cuts.discard(cut)
        return time.monotonic()

    def close(self):
        """Deletes everything made, each step on its own so that one failure leaves no other
        leftover; what could not be deleted is reported on stderr (sweep_dead_runs retries)."""
        failed = []
        if self.made_root_veth:
            r = subprocess.run([IP, "link", "del", self.root_veth], capture_output=True, text=True)
            if r.returncode != 0 and "Cannot find device" not in r.stderr:
                failed.append(f"{self.root_veth}: {r.stderr.strip()}")
            self.made_root_veth = False
        # Node namespaces first: their veths go with them, and then the hub's bridge is alone.
        for name in reversed(self.made_ns):
            r = subprocess.run([IP, "netns", "del", name], capture_output=True, text=True)
            if r.returncode != 0:
                failed.append(f"{name}: {r.stderr.strip()}")
        self.made_ns = []
        self.nodes = {}
        if failed:
            print(f"netns: could not delete {'; '.join(failed)}", file=sys.stderr)
        return not failed

    def leftovers(self):
        """What of this network still exists (nothing, once close() has run)."""
        try:
            present = set(os.listdir(NS_DIR))
        except FileNotFoundError:
            present = set()
        left = [n for n in self.every_ns if n in present]
        if ip("link", "show", self.root_veth, check=False).strip():
            left.append(self.root_veth)
        return left
