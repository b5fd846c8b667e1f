#!/usr/bin/env python3
"""Measurements behind bench/etcd.sh: `lock -backend etcd` against `etcdctl lock` on one etcd.

Both tools are started the same way (posix_spawn, stdio on /dev/null, then wait4), interleaved
run by run, against the same server, each on a prefix of its own.
"""
import argparse
import http.client
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from etcd_server import EtcdServer, b64, grpc_calls  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
import orphans  # noqa: E402
from summary_table import print_summary  # noqa: E402

DEVNULL = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
           (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
           (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)]


def run(argv, env):
    """Returns (wall ms, exit code) of one command."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=DEVNULL)
    _, status = os.waitpid(pid, 0)
    return (time.perf_counter() - t0) * 1e3, os.waitstatus_to_exitcode(status)


def peak_rss_mb(argv, env):
    """Peak RSS of one run, through GNU time: a process started straight from this one would
    report this Python's own peak, which Linux carries across exec."""
    r = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True)
    return int(r.stderr.split()[-1]) / 1024


def startup(lock, reps):
    """Median wall ms of `-version` for the static lock and for its companion lock-net, run
    interleaved: what a server-backend run pays to start before its first request."""
    net = os.path.join(os.path.dirname(lock), "lock-net")
    if not os.access(net, os.X_OK):
        net = os.path.join(os.path.dirname(lock), "..", "libexec", "lock", "lock-net")
    times = {"lock": [], "lock-net": []}
    for i in range(reps + 5):
        for name, argv in ([("lock", [lock, "-version"]), ("lock-net", [net, "-version"])][::1 if i % 2 else -1]):
            ms, code = run(argv, {})
            if code != 0:
                sys.exit(f"{name} -version failed (exit {code})")
            if i >= 5:
                times[name].append(ms)
    return {name: statistics.median(v) for name, v in times.items()}


def cpu_seconds(pid):
    """User and system CPU a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(etcd, limit=30):
    """Waits until etcd holds no lease: etcdctl leaves its own to expire, 10 s after its run, and
    their expiry is work etcd does for it, not for whatever runs next."""
    deadline = time.monotonic() + limit
    while etcd.leases():
        if time.monotonic() > deadline:
            sys.exit(f"etcd still holds leases {limit} s after the runs")
        time.sleep(0.2)


def idle_rate(pid, seconds=2.0):
    """CPU seconds per second the server spends with nothing to do."""
    before, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - t0)


def all_at_once(contenders, ready):
    """Forks `contenders` processes; each calls ready(), which returns its work, and waits. The
    go() returned lets them all start at once and returns the seconds until all ended and whether
    none failed: each work returns how many of its runs failed."""
    go_r, go_w = os.pipe()
    pids = []
    for _ in range(contenders):
        pid = os.fork()
        if pid == 0:
            failed = True
            try:
                os.close(go_w)
                work = ready()
                os.read(go_r, 1)
                failed = work()
            finally:
                os._exit(1 if failed else 0)  # never back into the parent's code
        pids.append(pid)
    os.close(go_r)

    def go():
        t0 = time.perf_counter()
        os.close(go_w)  # everyone starts now
        ok = all(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) == 0 for p in pids)
        return time.perf_counter() - t0, ok
    return go


def quiet(etcd, idle, limit=5):
    """Waits (up to `limit` seconds) until etcd spends no more CPU than when idle, give or take a
    clock tick over half a second: what the last run left it to do (its last commit, closing the
    streams) is not the next run's."""
    deadline = time.monotonic() + limit
    while idle_rate(etcd.proc.pid, 0.5) > idle + 0.02 and time.monotonic() < deadline:
        pass


def contended(argv, env, contenders, rounds, etcd=None, idle=0.0):
    """Acquisitions per second of `contenders` processes doing `rounds` runs each, all at once;
    with the CPU each acquisition cost the clients (the tool, its child, the harness) and, given
    `etcd`, etcd (the expiry of leases left behind included, its idle use taken off; else None).
    The ZooKeeper bench uses it without etcd."""
    if etcd:
        settle(etcd)
        quiet(etcd, idle)

    def ready():
        orphans.adopt()  # so that lock's watchdogs, which outlive it a moment, count too

        def work():
            failed = sum(run(argv, env)[1] != 0 for _ in range(rounds))
            orphans.reap()
            return failed
        return work
    go = all_at_once(contenders, ready)
    clients = resource.getrusage(resource.RUSAGE_CHILDREN)
    server = cpu_seconds(etcd.proc.pid) if etcd else 0.0
    t0 = time.perf_counter()
    took, ok = go()
    done = resource.getrusage(resource.RUSAGE_CHILDREN)
    n = contenders * rounds
    client_ms = (done.ru_utime + done.ru_stime - clients.ru_utime - clients.ru_stime) / n * 1e3
    if not etcd:
        return n / took, ok, client_ms, None
    settle(etcd)
    server = cpu_seconds(etcd.proc.pid) - server - idle * (time.perf_counter() - t0)
    return n / took, ok, client_ms, max(server, 0) / n * 1e3


def round_trips(etcd, argv, env):
    """The calls and TCP connections of one run, made through a proxy that counts connections."""
    host, port = etcd.url.split("//")[1].rsplit(":", 1)
    with FaultProxy(host, int(port)) as proxy:
        before = grpc_calls(etcd.url)
        code = run(argv, dict(env, ETCDCTL_ENDPOINTS=proxy.url))[1]
        if code != 0:
            sys.exit(f"{' '.join(argv)} failed (exit {code}) through the proxy")
        calls = grpc_calls(etcd.url) - before
        return calls, proxy.connections()


class FloorClient:
    """The floor: the requests an acquisition and release cannot do without, from a client that
    is already running, on one kept-alive connection: lease grant, the transaction that queues and
    reads the queue, revoke; under contention, between the last two, a watch on the key just ahead
    (on a connection of its own, since only closing it ends the stream) and a read of the queue
    once it goes, until no key is ahead. What lock adds to it is its process, its child and its
    TCP connections."""

    def __init__(self, url, prefix):
        self.host, port = url.split("//")[1].rsplit(":", 1)
        self.port = int(port)
        self.conn = http.client.HTTPConnection(self.host, self.port)
        self.prefix = prefix

    def call(self, path, body):
        self.conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        reply = self.conn.getresponse()
        data = json.loads(reply.read())
        if reply.status != 200:
            sys.exit(f"floor client: {path}: {reply.status} {data}")
        return data

    def queue(self, order):
        """A read of the whole queue, its keys by create revision."""
        return {"key": b64(f"{self.prefix}/".encode()), "range_end": b64(f"{self.prefix}0".encode()),
                "sort_order": order, "sort_target": "CREATE", "keys_only": True}

    def ahead(self, below):
        """The last key created before revision `below`, if any, and the revision read at."""
        reply = self.call("/v3/kv/range", {**self.queue("DESCEND"), "limit": 1,
                                           "max_create_revision": str(below - 1)})
        return (reply["kvs"][0]["key"] if reply.get("kvs") else None), int(reply["header"]["revision"])

    def wait_deleted(self, key, after, may_lag):
        """Waits until `key` is deleted at a revision after `after`. Unless `may_lag`, returns
        True at once when etcd is already past `after` as the watch is made: etcd would serve that
        watch from its history, which it looks through every 100 ms, so reading again is quicker
        (as lock does)."""
        watch = http.client.HTTPConnection(self.host, self.port)
        watch.request("POST", "/v3/watch", json.dumps(
            {"create_request": {"key": key, "start_revision": str(after + 1)}}))
        stream = watch.getresponse()
        behind = False
        for line in stream:
            result = json.loads(line)["result"]
            made_at = int(result["header"]["revision"]) if result.get("created") else 0
            behind = made_at > after and not may_lag
            if behind or any(e.get("type") == "DELETE" for e in result.get("events", [])):
                break
        watch.close()
        return behind

    def run(self):
        """Returns the wall ms of one acquisition and release."""
        t0 = time.perf_counter()
        lease = self.call("/v3/lease/grant", {"TTL": 10})["ID"]
        key = b64(f"{self.prefix}/{int(lease):x}".encode())
        read = {"request_range": self.queue("ASCEND")}
        reply = self.call("/v3/kv/txn", {
            "compare": [{"target": "CREATE", "key": key, "create_revision": "0", "result": "EQUAL"}],
            "success": [{"request_put": {"key": key, "value": "", "lease": lease}}, read],
            "failure": [read]})
        if not reply.get("succeeded"):
            sys.exit("floor client: the transaction did not queue")
        mine = int(reply["header"]["revision"])
        kvs = reply["responses"][1]["response_range"].get("kvs", [])
        before = [kv for kv in kvs if int(kv["create_revision"]) < mine]
        waiting_on, seen = (before[-1]["key"] if before else None), mine
        behind = 0  # looks in a row whose watch began behind etcd; the fourth is kept
        while waiting_on:
            behind = behind + 1 if self.wait_deleted(waiting_on, seen, behind == 3) else 0
            waiting_on, seen = self.ahead(mine)
        self.call("/v3/lease/revoke", {"ID": lease})
        return (time.perf_counter() - t0) * 1e3


def contended_floor(url, contenders, rounds, etcd, idle):
    """Acquisitions per second of `contenders` floor clients doing `rounds` acquisitions each, all
    at once: about the most a tool that follows the recipe could reach here, before it starts a
    process or runs a child."""
    settle(etcd)
    quiet(etcd, idle)

    def ready():
        client = FloorClient(url, "bench/floor-contended")

        def work():
            for _ in range(rounds):
                client.run()  # exits on any failure
            return 0
        return work
    took, ok = all_at_once(contenders, ready)()
    if not ok:
        sys.exit("floor clients failed under contention")
    return contenders * rounds / took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lock", required=True)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--contenders", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--trials", type=int, default=3)
    a = ap.parse_args()

    with EtcdServer() as etcd:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCK_", "CONSUL_", "ETCDCTL_"))}
        env.update(SHELL="/bin/sh", ETCDCTL_API="3", ETCDCTL_ENDPOINTS=etcd.url, LOCK_BACKEND="etcd")
        etcdctl = shutil.which("etcdctl")
        tools = {"lock": [a.lock, "-shell=false", "bench/lock", "/bin/true"],
                 "etcdctl lock": [etcdctl, "lock", "bench/etcdctl", "--", "/bin/true"]}
        fs = subprocess.run(["df", "-PT", etcd.dir], capture_output=True, text=True).stdout.split()[-6]
        print(f"== etcd at {etcd.url}, data in {etcd.dir} ({fs}; every write is an fsync there)")

        floor = FloorClient(etcd.url, "bench/floor")
        wall = {t: [] for t in [*tools, "floor"]}
        for i in range(a.reps + 5):
            for name, argv in (list(tools.items())[::1 if i % 2 else -1]):
                ms, code = run(argv, env)
                if code != 0:
                    sys.exit(f"{name} failed (exit {code}): {' '.join(argv)}")
                if i >= 5:  # the first runs warm the caches
                    wall[name].append(ms)
            ms = floor.run()
            if i >= 5:
                wall["floor"].append(ms)
        rss = {t: max(peak_rss_mb(argv, env) for _ in range(5)) for t, argv in tools.items()}
        print(f"\n== Uncontended: one run at a time, {a.reps} runs each, median (p10-p90); peak RSS")
        for name in wall:
            q = statistics.quantiles(wall[name], n=10)
            print(f"   {name:14} {statistics.median(wall[name]):7.2f} ms ({q[0]:.2f}-{q[8]:.2f})   "
                  + (f"{rss[name]:5.1f} MB" if name in rss
                     else "(grant, txn, revoke in process, one connection)"))
        ratio = statistics.median(wall["etcdctl lock"]) / statistics.median(wall["lock"])
        print(f"   lock is {ratio:.1f}x faster and uses {rss['lock'] / rss['etcdctl lock']:.2f}x "
              "the memory of etcdctl lock")

        print(f"\n== Contended: {a.contenders} contenders x {a.rounds} rounds, acquisitions/s, "
              f"{a.trials} trials, median")
        rates = {t: [] for t in tools}
        cpu = {t: {"client": [], "etcd": []} for t in tools}
        settle(etcd)
        idle = idle_rate(etcd.proc.pid)
        # What the harness costs per run (fork, posix_spawn, wait), with /bin/true alone: taken off.
        harness_ms = contended(["/bin/true"], env, a.contenders, a.rounds, etcd, idle)[2]
        floor_rates = []
        for _ in range(a.trials):
            for name, argv in tools.items():
                rate, ok, client_ms, etcd_ms = contended(argv, env, a.contenders, a.rounds, etcd, idle)
                if not ok:
                    sys.exit(f"{name} failed under contention")
                rates[name].append(rate)
                cpu[name]["client"].append(client_ms - harness_ms)
                cpu[name]["etcd"].append(etcd_ms)
            floor_rates.append(contended_floor(etcd.url, a.contenders, a.rounds, etcd, idle))
        for name, trials in [*rates.items(), ("floor", floor_rates)]:
            print(f"   {name:14} {statistics.median(trials):7.1f}/s   "
                  f"(trials: {', '.join(f'{r:.1f}' for r in trials)})"
                  + ("   (the recipe alone, from running processes: no start, no child)" if name == "floor" else ""))
        print(f"   lock/etcdctl: {statistics.median(rates['lock']) / statistics.median(rates['etcdctl lock']):.1f}x")
        print("   CPU per acquisition, median: the tool itself (the harness and a run of /bin/true, "
              "measured alone, taken off), and etcd "
              f"serving it, expiry of leases left behind included (both share {os.cpu_count()} CPUs)")
        for name in tools:
            print(f"   {name:14} {statistics.median(cpu[name]['client']):6.2f} ms + etcd "
                  f"{statistics.median(cpu[name]['etcd']):6.2f} ms")

        print("\n== Round trips of one uncontended run: calls etcd started (its own counters), "
              "TCP connections")
        for name, argv in tools.items():
            calls, connections = round_trips(etcd, argv, env)
            listed = ", ".join(f"{m} {n}" if n > 1 else m for m, n in sorted(calls.items()))
            print(f"   {name:14} {sum(calls.values())} calls on {connections} connection(s): {listed}")
        start = startup(a.lock, 300)
        print(f"\n== Start-up, -version, 300 runs each interleaved, median: static lock "
              f"{start['lock']:.2f} ms, lock-net {start['lock-net']:.2f} ms "
              f"(+{start['lock-net'] - start['lock']:.2f} ms)")
        med = {t: statistics.median(v) for t, v in wall.items()}
        rate = {t: statistics.median(v) for t, v in rates.items()}
        cpu_rows = [("contended CPU/acq., " + ("tool, ms" if side == "client" else "etcd, ms"),
                     *(statistics.median(cpu[t][side]) for t in tools), None, 2)
                    for side in ("client", "etcd")]
        print_summary("lock against etcdctl lock (peer) and the floor", [
            ("uncontended, ms", med["lock"], med["etcdctl lock"], med["floor"], 2),
            ("contended, acquisitions/s", rate["lock"], rate["etcdctl lock"],
             statistics.median(floor_rates), 1, "(floor: the recipe alone, about the most it allows)"),
            *cpu_rows,
            ("peak RSS, MB", rss["lock"], rss["etcdctl lock"], None, 1),
            ("start-up (-version), ms", start["lock-net"], None, start["lock"], 2, "(floor: the static lock)")])
        print(f"\nreproduce: {' '.join(sys.argv)}")


if __name__ == "__main__":
    main()
