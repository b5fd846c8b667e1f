#!/usr/bin/env python3
"""Measurements behind bench/scale.sh: a fleet's cron job, N contenders started at once on one
prefix of one server, each child holding 20 ms (--hold-ms), beside the peer doing the same on the
same server.

Per row:
- drain: the time until the last contender is done;
- requests per contender, counted by the server: etcd's gRPC calls (lease renewals apart: each
  tool renews on a timer, so they measure the wait, not the recipe; the CPU counts them), every
  packet ZooKeeper received (pings and renewals included), every request the Consul double saw,
  every statement PostgreSQL logged for the bench's role (log_statement = all, set for that role
  alone: the fixture's own queries are not counted, and the log's writing is in the CPU of both
  tools alike);
- the server's CPU per contender, until it holds nothing of the run any more (the expiry of
  leases a tool leaves behind counts as its own; for PostgreSQL, until every session's backend
  has ended: the postmaster's time, its reaped children's and its live children's, from /proc);
- the mean peak RSS of one contender (GNU time);
- on the local backend, where the kernel is the server, fairness: every contender comes back
  three times, and the longest of its runs over the mean run.

With --try-n, the try path too: that many runs of `lock -timeout 100ms` at once against one
holder, each one's wall time, and what they left on the server.

Consul runs on its API double, which is no server to time or weigh: only its requests count, and
the peer is the port of Go's client (api.Lock, api.Semaphore), whose memory is not Go's.

PostgreSQL runs at -n 1 beside withlock (npm advisory-lock, the same advisory lock for a name) and
at -n 2 alone, withlock having no semaphore; each ends with lock's server CPU per contender from
the smallest N to the largest, which the recipe keeps flat: one session and a few statements per
contender, the server's own queue handing the lock on.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tests", "consul_double"))
from etcd_bench import all_at_once, cpu_seconds, run  # noqa: E402

LOCAL_ROUNDS = 3


class Served:
    """A backend on a server of the bench's own: started on entering, stopped on leaving."""

    def __enter__(self):
        self.server.__enter__()
        self.env = self.environment()
        return self

    def __exit__(self, *exc):
        self.server.__exit__(*exc)

    def settle(self, limit=60):
        """Waits until the server holds no session of the last run (what a tool left behind
        to expire is its own work)."""
        deadline = time.monotonic() + limit
        while self.sessions():
            if time.monotonic() > deadline:
                sys.exit(f"{self.name}: sessions or leases still there {limit} s after the runs")
            time.sleep(0.2)


class Etcd(Served):
    name, peer = "etcd", "etcdctl lock"

    def __init__(self, lock):
        from etcd_server import EtcdServer, grpc_calls
        self.lock, self.grpc_calls = lock, grpc_calls
        self.server = EtcdServer()

    def environment(self):
        return dict(os.environ, ETCDCTL_API="3", ETCDCTL_ENDPOINTS=self.server.url)

    def argv(self, tool, prefix, child, flags=()):
        if tool == "lock":
            return [self.lock, "-backend", "etcd", *flags, "-shell=false", prefix, *child]
        return ["/usr/bin/etcdctl", "lock", prefix, *child]

    def left(self, prefix):
        return len(self.server.leases()) + len(self.server.keys(prefix + "/"))

    def requests(self):
        calls = self.grpc_calls(self.server.url)
        return sum(n for method, n in calls.items() if method not in ("LeaseKeepAlive", "LeaseLeases"))

    def cpu(self):
        return cpu_seconds(self.server.proc.pid)

    def sessions(self):
        return self.server.leases()


class ZooKeeper(Served):
    name, peer = "zookeeper", "kazoo Lock"

    def __init__(self, lock):
        from zookeeper_server import ZooKeeperServer, four_letter
        self.lock, self.four_letter = lock, four_letter
        self.server = ZooKeeperServer()

    def environment(self):
        return dict(os.environ, ZOOKEEPER_ENDPOINTS=self.server.connect_string)

    def argv(self, tool, prefix, child, flags=()):
        if tool == "lock":
            return [self.lock, "-backend", "zookeeper", *flags, "-shell=false", prefix, *child]
        return ["/usr/bin/python3", os.path.join(HERE, "kazoo_lock.py"), self.server.connect_string,
                "/" + prefix, "1", *child]

    def left(self, prefix):
        return self.server.session_count() + sum(map(len, self.server.ephemerals().values()))

    def requests(self):
        stats = dict(line.split("\t", 1) for line in
                     self.four_letter(self.server.port, "mntr", timeout=5.0).splitlines() if "\t" in line)
        return int(stats["zk_packets_received"])

    def cpu(self):
        return cpu_seconds(self.server.pid)

    def sessions(self):
        return self.server.session_count()


class Consul(Served):
    name, peer = "consul", "Go's api (port)"

    def __init__(self, lock, n):
        from fixture import ConsulDouble
        self.lock, self.n = lock, n
        self.server = ConsulDouble()
        self.name = f"consul -n {n}"

    def environment(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCK_", "CONSUL_"))}
        return dict(env, SHELL="/bin/sh", CONSUL_HTTP_ADDR=self.server.http_addr)

    def argv(self, tool, prefix, child, flags=()):
        head = [self.lock] if tool == "lock" else [sys.executable, os.path.join(ROOT, "tests", "consul_double", "consul_peer.py")]
        return [*head, *flags, "-n", str(self.n), "-shell=false", prefix, *child]

    def left(self, prefix):
        return len(self.server.sessions()) + sum(p["Key"].startswith(prefix + "/") for p in self.server.kv_all())

    def requests(self):
        return self.server.request_count()

    cpu = None  # a double's CPU is no server's

    def sessions(self):
        return self.server.sessions()


class Postgres(Served):
    name, peer = "postgres", "withlock"

    def __init__(self, lock, n, connections):
        from postgres_server import PostgresServer
        self.lock, self.n = lock, n
        self.server = PostgresServer(max_connections=max(300, connections))
        self.name = f"postgres -n {n}"
        if n != 1:
            self.peer = None  # withlock has no semaphore
        self.holders = None

    def __enter__(self):
        from postgres_bench import ServerCpu, StatementLog
        super().__enter__()
        self.server.settle()  # lock's first turns on a fresh server wait out forgotten holders
        self.reader = ServerCpu(self.server.pid)
        self.log = StatementLog(self.server).__enter__()
        self.statements = 0
        return self

    def environment(self):
        from postgres_bench import client_env
        return client_env(self.server)

    def argv(self, tool, prefix, child, flags=()):
        if tool == "lock":
            return [self.lock, "-backend", "postgres", "-n", str(self.n), *flags, "-shell=false", prefix, *child]
        from postgres_bench import withlock
        return withlock(prefix, *child)

    def left(self, prefix):
        """Sessions and advisory locks on the server. Called first with the try path's holders
        alone connected, then after the runs, when it waits (up to 10 s) for the backends of the
        runs' sessions, which their clients closed as they timed out, to end."""
        if self.holders is None:
            self.holders = set(self.reader.sessions())
        else:
            deadline = time.monotonic() + 10
            while not set(self.reader.sessions()) <= self.holders and time.monotonic() < deadline:
                time.sleep(0.01)
            self.holders = None
        return len(self.reader.sessions()) + len(self.server.advisory_locks())

    def requests(self):
        self.statements += self.log.read()[0]
        return self.statements

    def cpu(self):
        return self.reader.seconds()

    def sessions(self):
        return self.reader.sessions()


class Local:
    name, peer = "local", "flock"

    def __init__(self, lock, scratch):
        self.lock, self.scratch = lock, scratch

    def __enter__(self):
        self.env = dict(os.environ, LOCK_STATE_DIR=os.path.join(self.scratch, "state"))
        return self

    def __exit__(self, *exc):
        pass

    def argv(self, tool, prefix, child, flags=()):
        if tool == "lock":
            return [self.lock, *flags, "-shell=false", prefix, *child]
        return ["/usr/bin/flock", os.path.join(self.scratch, prefix.replace("/", "_")), *child]

    requests = cpu = None

    def settle(self):
        pass


def fleet(backend, argv, n, rounds, scratch):
    """One burst of `n` contenders at once, each running `argv` `rounds` times: a dict of drain s,
    requests, server CPU ms and mean peak RSS MB per contender, the longest run over the mean run,
    and whether all succeeded."""
    backend.settle()
    runs_dir = os.path.join(scratch, "runs")
    os.makedirs(runs_dir, exist_ok=True)

    def ready():
        mine = os.path.join(runs_dir, str(os.getpid()))  # ready() runs in the contender's process

        def work():
            failed = 0
            for k in range(rounds):
                ms, code = run(["/usr/bin/time", "-f", "%M", "-o", f"{mine}.rss{k}", *argv], backend.env)
                failed += code != 0
                with open(f"{mine}.ms{k}", "w") as f:
                    f.write(str(ms))
            return failed
        return work
    go = all_at_once(n, ready)
    requests = backend.requests() if backend.requests else None
    cpu = backend.cpu() if backend.cpu else None
    took, ok = go()
    backend.settle()
    row = {"drain": took, "ok": ok}
    if requests is not None:
        row["requests"] = (backend.requests() - requests) / n
    if cpu is not None:
        row["cpu"] = (backend.cpu() - cpu) / n * 1e3
    rss, ms = [], []
    for name in os.listdir(runs_dir):
        with open(os.path.join(runs_dir, name)) as f:
            text = f.read()
        (rss if ".rss" in name else ms).append(float(text.split()[-1]) / (1024 if ".rss" in name else 1))
        os.unlink(os.path.join(runs_dir, name))
    row["rss"] = statistics.mean(rss)
    row["fairness"] = max(ms) / statistics.mean(ms)
    return row


def try_path(backend, n, scratch):
    """`n` runs of `lock -timeout 100ms` at once against holders of every slot: each one's wall
    time from its spawn to its exit, whether every one timed out (exit 1), and what they left on
    the server (leases, sessions, keys, nodes) beside the holders' own."""
    prefix = f"try{n}-{time.time_ns()}"
    held = [os.path.join(scratch, f"held{k}") for k in range(getattr(backend, "n", 1))]
    holders = [subprocess.Popen(backend.argv("lock", prefix, ["sh", "-c", f"touch {h}; exec sleep 600"]),
                                env=backend.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
               for h in held]
    try:
        deadline = time.monotonic() + 30
        while not all(map(os.path.exists, held)):
            if any(h.poll() is not None for h in holders) or time.monotonic() > deadline:
                sys.exit("the try path's holders did not hold")
            time.sleep(0.01)
        before = backend.left(prefix)
        times = os.path.join(scratch, "try")
        os.makedirs(times, exist_ok=True)
        argv = backend.argv("lock", prefix, ["true"], ["-timeout", "100ms"])

        def ready():
            def work():
                ms, code = run(argv, backend.env)
                with open(os.path.join(times, str(os.getpid())), "w") as f:
                    f.write(f"{ms} {code}")
                return code != 1
            return work
        _, ok = all_at_once(n, ready)()
        left = backend.left(prefix) - before
    finally:
        for h in holders:
            h.terminate()
            h.wait()
        for h in held:
            if os.path.exists(h):
                os.unlink(h)
    runs = []
    for name in os.listdir(times):
        with open(os.path.join(times, name)) as f:
            runs.append(float(f.read().split()[0]))
        os.unlink(os.path.join(times, name))
    runs.sort()
    print(f"{backend.name:12} {n:>5} try -timeout 100ms: run ms p50 {runs[len(runs) // 2]:.0f}, "
          f"p99 {runs[int(len(runs) * 0.99)]:.0f}, max {runs[-1]:.0f}; "
          f"{'all timed out (exit 1)' if ok else '!! not all exited 1'}; left on the server: {left}",
          flush=True)
    return ok and left == 0


COLUMNS = (("drain", "drain s", 8), ("requests", "req/contender", 14),
           ("cpu", "server CPU ms/contender", 24), ("rss", "client RSS MB", 14))


def cell(row, key, width):
    return f"{row[key]:>{width}.2f}" if key in row else f"{'-':>{width}}"


def columns_of(fair):
    return COLUMNS + ((("fairness", "longest/mean run", 17),) if fair else ())


def report_row(backend, n, tool, row, fair):
    """Each row as soon as it is measured: a long run shows what it has so far."""
    print(f"{backend.name:12} {n:>5} {tool:16} " + " ".join(cell(row, k, w) for k, _, w in columns_of(fair))
          + ("" if row["ok"] else "   !! a run failed"), flush=True)


def report(backend, n, rows, fair):
    columns = columns_of(fair)
    ours, peer = rows["lock"], rows[backend.peer]
    ratios = {k: ours[k] / peer[k] for k, _, _ in columns if k in ours and k in peer and peer[k]}
    print(f"{backend.name:12} {n:>5} {'lock / peer':16} " + " ".join(
        f"{ratios[k]:>{w - 1}.2f}x" if k in ratios else f"{'':>{w}}" for k, _, w in columns), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lock", required=True)
    ap.add_argument("--n", default="10,100,200")
    ap.add_argument("--backends", default="local,etcd,zookeeper,consul,postgres")
    ap.add_argument("--try-n", type=int, default=0, help="also the try path at this many contenders")
    ap.add_argument("--hold-ms", type=int, default=20, help="how long each contender's child holds")
    a = ap.parse_args()
    child = ["sleep", str(a.hold_ms / 1000)]
    sizes = [int(x) for x in a.n.split(",")]
    failed = False
    with tempfile.TemporaryDirectory() as scratch:
        makers = {"local": lambda: Local(a.lock, scratch), "etcd": lambda: Etcd(a.lock),
                  "zookeeper": lambda: ZooKeeper(a.lock),
                  "consul": lambda: [Consul(a.lock, 1), Consul(a.lock, 2)],
                  "postgres": lambda: [Postgres(a.lock, 1, max(sizes) + a.try_n + 10),
                                       Postgres(a.lock, 2, max(sizes) + a.try_n + 10)]}
        for wanted in a.backends.split(","):
            made = makers[wanted]()
            for backend in made if isinstance(made, list) else [made]:
                local = isinstance(backend, Local)
                tools = ("lock", backend.peer) if backend.peer else ("lock",)
                print(f"\n{'backend':12} {'N':>5} {'tool':16} " + " ".join(
                    f"{title:>{w}}" for _, title, w in columns_of(local)))
                with backend:
                    # A round of each first, unmeasured: a JVM's server compiles its hot paths
                    # then, and that work is neither tool's. A round of 10 left some of it to the
                    # first measured run (1.5x its tool's CPU at N = 200); one of 100 does not.
                    for tool in tools:
                        fleet(backend, backend.argv(tool, f"warm-{tool.split()[0]}", child), min(100, max(sizes)), 1, scratch)
                    per_n = {}
                    for i, n in enumerate(sizes):
                        rows = {}
                        for tool in tools[::-1 if i % 2 else 1]:
                            prefix = f"scale{n}-{tool.split()[0]}-{time.time_ns()}"
                            rows[tool] = fleet(backend, backend.argv(tool, prefix, child), n,
                                               LOCAL_ROUNDS if local else 1, scratch)
                            failed |= not rows[tool]["ok"]
                            if isinstance(backend, Consul) and tool != "lock":  # no time nor memory on a double
                                for key in ("drain", "rss"):
                                    rows[tool].pop(key)
                            report_row(backend, n, tool, rows[tool], local)
                        if backend.peer:
                            report(backend, n, rows, local)
                        per_n[n] = rows["lock"]
                    if isinstance(backend, Postgres):
                        cpu = {n: row["cpu"] for n, row in per_n.items()}
                        print(f"{backend.name:12} lock's server CPU ms/contender from N = {min(cpu)} to "
                              f"{max(cpu)}: {cpu[max(cpu)] / cpu[min(cpu)] if cpu[min(cpu)] else float('nan'):.2f}x ("
                              + ", ".join(f"{v:.2f} at {n}" for n, v in cpu.items()) + ")", flush=True)
                    if a.try_n and not local:
                        failed |= not try_path(backend, a.try_n, scratch)
    if failed:
        sys.exit("!! some runs failed")


if __name__ == "__main__":
    main()
