#!/usr/bin/env python3
"""Measurements behind bench/zookeeper.sh: `lock -backend zookeeper` against kazoo's Lock and
Apache Curator's InterProcessMutex, on one ZooKeeper server, each tool on a path of its own.

Process to process, each tool is started the same way (posix_spawn, stdio on /dev/null, wait4),
interleaved run by run: connect, acquire, run /bin/true, release, close. The peers are libraries
that usually live in a long-running process, so their in-process cost per acquire+release after
connecting is shown too; lock pays a process and a session per acquisition by design.
"""
import argparse
import collections
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from etcd_bench import contended, peak_rss_mb, run  # noqa: E402
from summary_table import print_summary  # noqa: E402
import curator_peer  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
from zk_frames import RequestLog  # noqa: E402
from zookeeper_server import ZooKeeperServer  # noqa: E402

KAZOO = ["/usr/bin/python3", os.path.join(HERE, "kazoo_lock.py")]


def in_process_ms(argv_for_rounds, rounds):
    """Per acquire+release after connecting, from two runs: (T(rounds+1) - T(1)) / rounds."""
    one, _ = run(argv_for_rounds(1), os.environ)
    many, code = run(argv_for_rounds(rounds + 1), os.environ)
    if code != 0:
        sys.exit(f"failed: {' '.join(argv_for_rounds(rounds + 1))}")
    return (many - one) / rounds


def round_trips(zk, argv_for, env):
    """The requests (pings left out) and TCP connections of one run, through a proxy that
    reads them off the wire; argv_for(connect_string) is the command."""
    log = RequestLog()
    host, port = zk.connect_string.rsplit(":", 1)
    with FaultProxy(host, int(port), on_upstream=log.feed) as proxy:
        argv = argv_for(proxy.address)
        code = run(argv, dict(env, ZOOKEEPER_ENDPOINTS=proxy.address))[1]
        if code != 0:
            sys.exit(f"{' '.join(argv)} failed (exit {code}) through the proxy")
        seen = log.requests()
    return collections.Counter(op for _, op in seen), len({c for c, _ in seen})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lock", required=True)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--jvm-reps", type=int, default=5)
    ap.add_argument("--contenders", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--trials", type=int, default=3)
    a = ap.parse_args()

    with ZooKeeperServer() as zk:
        cs = zk.connect_string
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCK_", "CONSUL_", "ZOOKEEPER_"))}
        env.update(SHELL="/bin/sh", LOCK_BACKEND="zookeeper", ZOOKEEPER_ENDPOINTS=cs)
        curator = lambda path, rounds: curator_peer.command(cs, "mutex", path, rounds, 0, "/dev/null")
        tools = {"lock": [a.lock, "-shell=false", "bench/lock", "/bin/true"],
                 "kazoo Lock": [*KAZOO, cs, "/bench/kazoo", "1", "/bin/true"],
                 "Curator": curator("/bench/curator", 1)}
        print(f"== ZooKeeper at {cs}, data in {zk.dir}")

        wall = {t: [] for t in tools}
        for i in range(a.reps + 3):
            for name, argv in (list(tools.items())[::1 if i % 2 else -1]):
                if name == "Curator" and i >= a.jvm_reps + 3:
                    continue
                ms, code = run(argv, env)
                if code != 0:
                    sys.exit(f"{name} failed (exit {code}): {' '.join(argv)}")
                if i >= 3:  # the first runs warm the caches
                    wall[name].append(ms)
        rss = {t: max(peak_rss_mb(argv, env) for _ in range(3)) for t, argv in tools.items()}
        print("\n== Uncontended, process to process (connect, acquire, /bin/true, release, close): "
              "median (p90 or max); peak RSS")
        for name in tools:
            spread = statistics.quantiles(wall[name], n=10)[8] if len(wall[name]) >= 10 else max(wall[name])
            print(f"   {name:12} {statistics.median(wall[name]):8.2f} ms ({spread:.2f})  {rss[name]:6.1f} MB"
                  f"   ({len(wall[name])} runs)")
        for peer in ("kazoo Lock", "Curator"):
            print(f"   lock is {statistics.median(wall[peer]) / statistics.median(wall['lock']):.1f}x faster "
                  f"than {peer} and uses {rss['lock'] / rss[peer]:.2f}x its memory")

        print("\n== Round trips of one run as above (the server reaps emptied parents, so each run "
              "makes them again): requests, connect included and pings left out; TCP connections")
        for name, argv_for in (("lock", lambda _: tools["lock"]),
                               ("kazoo Lock", lambda at: [*KAZOO, at, "/bench/kazoo", "1", "/bin/true"]),
                               ("Curator", lambda at: curator_peer.command(at, "mutex", "/bench/curator", 1, 0, "/dev/null"))):
            ops, connections = round_trips(zk, argv_for, env)
            listed = ", ".join(f"{op} {n}" if n > 1 else op for op, n in sorted(ops.items()))
            print(f"   {name:12} {sum(ops.values())} requests on {connections} connection(s): {listed}")

        rounds = 200
        kazoo_in = in_process_ms(lambda n: [*KAZOO, cs, "/bench/kazoo-in", str(n)], rounds)
        curator_in = in_process_ms(lambda n: curator("/bench/curator-in", n), rounds)
        print(f"\n== In process, after connecting: one acquire+release, mean of {rounds}")
        print(f"   kazoo Lock   {kazoo_in:8.2f} ms")
        print(f"   Curator      {curator_in:8.2f} ms")
        print(f"   lock, a whole run as above: {statistics.median(wall['lock']) / kazoo_in:.2f}x kazoo's, "
              f"{statistics.median(wall['lock']) / curator_in:.2f}x Curator's")

        contenders = {"lock": tools["lock"],
                      "kazoo Lock": [*KAZOO, cs, "/bench/kazoo-c", str(a.rounds), "/bin/true"],
                      "Curator": curator("/bench/curator-c", a.rounds)}
        print(f"\n== Contended: {a.contenders} contenders x {a.rounds} rounds on one path, "
              f"acquisitions/s, {a.trials} trials, median (lock: a process per acquisition; the "
              "peers: one process per contender)")
        rates = {t: [] for t in contenders}
        for _ in range(a.trials):
            for name, argv in contenders.items():
                rate, ok, *_ = contended(argv, env, a.contenders, a.rounds if name == "lock" else 1)
                if not ok:
                    sys.exit(f"{name} failed under contention")
                rates[name].append(rate * (1 if name == "lock" else a.rounds))
        for name in contenders:
            print(f"   {name:12} {statistics.median(rates[name]):7.1f}/s   "
                  f"(trials: {', '.join(f'{r:.1f}' for r in rates[name])})")
        for peer in ("kazoo Lock", "Curator"):
            print(f"   lock/{peer}: {statistics.median(rates['lock']) / statistics.median(rates[peer]):.2f}x")

        # The floor: the fastest peer's acquire and release inside a process that is already
        # connected, the requests alone on one kept-alive connection.
        floor = min(kazoo_in, curator_in)
        med = {t: statistics.median(v) for t, v in wall.items()}
        rate = {t: statistics.median(v) for t, v in rates.items()}
        print_summary("lock against kazoo's Lock (peer) and the floor (an acquire and release in a "
                      "connected process)", [
            ("process to process, ms", med["lock"], med["kazoo Lock"], floor, 2),
            ("contended, acquisitions/s", rate["lock"], rate["kazoo Lock"], None, 1),
            ("peak RSS, MB", rss["lock"], rss["kazoo Lock"], None, 1)])
        print(f"\nreproduce: {' '.join(sys.argv)}")


if __name__ == "__main__":
    main()
