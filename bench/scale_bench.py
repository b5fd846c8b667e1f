#!/usr/bin/env python3
"""Measurements behind bench/scale.sh: a fleet's cron job, N contenders started at once on one
prefix of one server, each child holding 20 ms, beside the peer doing the same on the same fresh
server. Per row: the time until the last contender is done (drain), the server's requests per
contender (its own counters; lease renewals apart, since they depend on time alone), the server's
CPU per contender (until every lease is gone, so that the expiry of leases a tool leaves behind
counts as its own), and the mean peak RSS of one contender (GNU time).

etcd only, so far: the other backends' rows are still to come.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from etcd_server import EtcdServer, grpc_calls  # noqa: E402
from etcd_bench import all_at_once, cpu_seconds, run, settle  # noqa: E402


def fleet(etcd, argv, n, scratch):
    """One burst of `n` runs of `argv` at once: (drain s, requests per contender, server CPU ms
    per contender, mean peak RSS MB, whether all succeeded)."""
    settle(etcd)
    env = dict(os.environ, ETCDCTL_API="3", ETCDCTL_ENDPOINTS=etcd.url)

    def ready():
        rss = os.path.join(scratch, str(os.getpid()))  # ready() runs in the contender's process

        def work():
            return run(["/usr/bin/time", "-f", "%M", "-o", rss, *argv], env)[1] != 0
        return work
    go = all_at_once(n, ready)
    calls, cpu = grpc_calls(etcd.url), cpu_seconds(etcd.proc.pid)
    took, ok = go()
    settle(etcd)
    cpu = cpu_seconds(etcd.proc.pid) - cpu
    calls = grpc_calls(etcd.url) - calls
    for method in ("LeaseKeepAlive", "LeaseLeases"):  # renewals; settle()'s own looks
        calls.pop(method, None)
    rss = []
    for name in os.listdir(scratch):
        with open(os.path.join(scratch, name)) as f:
            rss.append(int(f.read().split()[-1]) / 1024)
        os.unlink(os.path.join(scratch, name))
    return took, sum(calls.values()) / n, cpu / n * 1e3, statistics.mean(rss), ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lock", required=True)
    ap.add_argument("--n", default="10,100,200")
    a = ap.parse_args()
    sizes = [int(x) for x in a.n.split(",")]
    print(f"{'backend':9} {'N':>5} {'tool':14} {'drain s':>8} {'req/contender':>14} "
          f"{'server CPU ms/contender':>24} {'client RSS MB':>14}")
    failed = False
    with EtcdServer() as etcd, tempfile.TemporaryDirectory() as scratch:
        for n in sizes:
            rows = {}
            for tool, argv in (("lock", [a.lock, "-backend", "etcd", f"scale{n}-lock-{time.time_ns()}", "sleep 0.02"]),
                               ("etcdctl lock", ["/usr/bin/etcdctl", "lock", f"scale{n}-etcdctl-{time.time_ns()}",
                                                 "sleep", "0.02"])):
                rows[tool] = fleet(etcd, argv, n, scratch)
                took, req, cpu, rss, ok = rows[tool]
                failed |= not ok
                print(f"{'etcd':9} {n:>5} {tool:14} {took:>8.2f} {req:>14.1f} {cpu:>24.2f} {rss:>14.1f}"
                      + ("" if ok else "   !! a run failed"), flush=True)
            ours, peer = rows["lock"], rows["etcdctl lock"]
            print(f"{'etcd':9} {n:>5} {'lock / peer':14} " + " ".join(
                f"{o / p if p else float('nan'):>{w}.2f}x" for o, p, w in
                zip(ours[:4], peer[:4], (7, 13, 23, 13))), flush=True)
    if failed:
        sys.exit("!! some runs failed")


if __name__ == "__main__":
    main()
