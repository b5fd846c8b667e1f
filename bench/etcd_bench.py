#!/usr/bin/env python3
"""Measurements behind bench/etcd.sh: `lock -backend etcd` against `etcdctl lock` on one etcd.

Both tools are started the same way (posix_spawn, stdio on /dev/null, then wait4), interleaved
run by run, against the same server, each on a prefix of its own.
"""
import argparse
import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from etcd_server import EtcdServer  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402

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


def contended(argv, env, contenders, rounds):
    """Acquisitions per second of `contenders` processes doing `rounds` runs each, all at once."""
    go_r, go_w = os.pipe()
    pids = []
    for _ in range(contenders):
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            os.read(go_r, 1)
            failed = sum(run(argv, env)[1] != 0 for _ in range(rounds))
            os._exit(1 if failed else 0)
        pids.append(pid)
    os.close(go_r)
    t0 = time.perf_counter()
    os.close(go_w)  # everyone starts now
    ok = all(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) == 0 for p in pids)
    return contenders * rounds / (time.perf_counter() - t0), ok


def grpc_calls(url):
    """etcd's count of the calls it started, by method: the JSON gateway's requests become the
    same gRPC calls as etcdctl's, so both tools are counted alike."""
    with urllib.request.urlopen(url + "/metrics") as r:
        text = r.read().decode()
    calls = collections.Counter()
    for m in re.finditer(r'^grpc_server_started_total\{grpc_method="(\w+)"[^}]*\} (\d+)$', text, re.M):
        calls[m.group(1)] += int(m.group(2))
    return calls


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

        wall = {t: [] for t in tools}
        for i in range(a.reps + 5):
            for name, argv in (list(tools.items())[::1 if i % 2 else -1]):
                ms, code = run(argv, env)
                if code != 0:
                    sys.exit(f"{name} failed (exit {code}): {' '.join(argv)}")
                if i >= 5:  # the first runs warm the caches
                    wall[name].append(ms)
        rss = {t: max(peak_rss_mb(argv, env) for _ in range(5)) for t, argv in tools.items()}
        print(f"\n== Uncontended: one run at a time, {a.reps} runs each, median (p90); peak RSS")
        for name in tools:
            q = statistics.quantiles(wall[name], n=10)
            print(f"   {name:14} {statistics.median(wall[name]):7.2f} ms ({q[8]:.2f})   "
                  f"{rss[name]:5.1f} MB")
        ratio = statistics.median(wall["etcdctl lock"]) / statistics.median(wall["lock"])
        print(f"   lock is {ratio:.1f}x faster and uses {rss['lock'] / rss['etcdctl lock']:.2f}x "
              "the memory of etcdctl lock")

        print(f"\n== Contended: {a.contenders} contenders x {a.rounds} rounds, acquisitions/s, "
              f"{a.trials} trials, median")
        rates = {t: [] for t in tools}
        for _ in range(a.trials):
            for name, argv in tools.items():
                rate, ok = contended(argv, env, a.contenders, a.rounds)
                if not ok:
                    sys.exit(f"{name} failed under contention")
                rates[name].append(rate)
        for name in tools:
            print(f"   {name:14} {statistics.median(rates[name]):7.1f}/s   "
                  f"(trials: {', '.join(f'{r:.1f}' for r in rates[name])})")
        print(f"   lock/etcdctl: {statistics.median(rates['lock']) / statistics.median(rates['etcdctl lock']):.1f}x")

        print("\n== Round trips of one uncontended run: calls etcd started (its own counters), "
              "TCP connections")
        for name, argv in tools.items():
            calls, connections = round_trips(etcd, argv, env)
            listed = ", ".join(f"{m} {n}" if n > 1 else m for m, n in sorted(calls.items()))
            print(f"   {name:14} {sum(calls.values())} calls on {connections} connection(s): {listed}")
        print(f"\nreproduce: {' '.join(sys.argv)}")


if __name__ == "__main__":
    main()
