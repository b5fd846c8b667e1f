#!/usr/bin/env python3
"""Two builds of lock on the same uncontended run, interleaved run by run: what a change costs.

    bench/ab.py --a old/lock --b build/lock                    # local backend, in $TMPDIR
    TMPDIR=/dev/shm bench/ab.py --a old/lock --b build/lock --runs 2000
    bench/ab.py --a old/lock --b build/lock --backend etcd     # against an etcd started here

Each run is `lock -shell=false <prefix> /bin/true`, started by posix_spawn with stdio on
/dev/null, A then B then A... so that a machine whose speed drifts slows both alike. CPU counts
every process a run leaves behind (the watchdog included: this process adopts and reaps them).
Prints the medians of wall and CPU time for each build and the median of the per-pair ratios B/A.
"""
import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
import orphans  # noqa: E402

DEVNULL = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
           (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
           (os.POSIX_SPAWN_OPEN, 2, "/dev/null", os.O_WRONLY, 0)]


def cpu_of_children():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (u.ru_utime + u.ru_stime) * 1e3


def one_run(argv, env):
    """(wall ms, CPU ms) of one run and of everything it left behind."""
    cpu = cpu_of_children()
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=DEVNULL)
    _, status = os.waitpid(pid, 0)
    wall = (time.perf_counter() - t0) * 1e3
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[0]} exited {os.waitstatus_to_exitcode(status)}")
    orphans.reap()
    return wall, cpu_of_children() - cpu


def compare(a, b, env, runs, warmup):
    """In a process of its own, which adopts what the runs leave behind and owns nothing else
    (not the etcd this process may have started, which reap() would wait for)."""
    sys.stdout.flush()
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status):
            sys.exit(1)
        return
    code = 0
    try:
        orphans.adopt()
        measure(a, b, env, runs, warmup)
    except Exception as e:
        print(f"ab.py: {e}", file=sys.stderr)
        code = 1
    finally:
        sys.stdout.flush()
        os._exit(code)


def measure(a, b, env, runs, warmup):
    argv = {name: [path, "-shell=false", f"ab/{name}", "/bin/true"] for name, path in (("a", a), ("b", b))}
    for _ in range(warmup):
        one_run(argv["a"], env)
        one_run(argv["b"], env)
    got = {"a": [], "b": []}
    for _ in range(runs):
        for name in ("a", "b"):
            got[name].append(one_run(argv[name], env))
    for i, what in enumerate(("wall", "CPU")):
        med = {n: statistics.median(x[i] for x in got[n]) for n in got}
        ratio = statistics.median(y[i] / x[i] for x, y in zip(got["a"], got["b"]) if x[i] > 0)
        print(f"   {what:5} A {med['a']:.3f} ms   B {med['b']:.3f} ms   B-A {med['b'] - med['a']:+.3f} ms"
              f"   B/A per pair {ratio:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="the lock binary to compare against")
    ap.add_argument("--b", required=True, help="the lock binary measured")
    ap.add_argument("--backend", choices=("local", "etcd"), default="local")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCK_", "CONSUL_", "ETCDCTL_"))}
    with tempfile.TemporaryDirectory(prefix="lock-ab-") as tmp:
        env.update(SHELL="/bin/sh", LOCK_STATE_DIR=os.path.join(tmp, "state"))
        print(f"== {args.backend}, uncontended, {args.runs} runs each, interleaved "
              f"(state in {tmp})\n   A {args.a}\n   B {args.b}")
        if args.backend == "local":
            compare(args.a, args.b, env, args.runs, args.warmup)
            return
        from etcd_server import EtcdServer
        with EtcdServer() as etcd:
            env.update(ETCDCTL_ENDPOINTS=etcd.url, LOCK_BACKEND="etcd")
            compare(args.a, args.b, env, args.runs, args.warmup)


if __name__ == "__main__":
    main()
