#!/usr/bin/env python3
"""Runs the fault scenarios and prints the checker's table; exits 1 if any row failed.

    tests/chaos/run.py --backends etcd,postgres --faults "blackhole,kill" --n 1,2 --quota 50
    tests/chaos/run.py --sections-per-backend 10000 --gap 150 --think 0

Each (backend, fault, n) is one Scenario (scenarios.py): contenders loop on a prefix of their own
while a victim meets the fault, until the quota of critical sections is logged. A lane is a
backend's server and the scenarios it serves in turn; --split gives a server backend several
lanes, --jobs runs lanes side by side. ^C or SIGTERM ends every scenario at its next step and
stops everything started. A row listed in scenarios.EXPECTED_FAILURES prints as xfail (or XPASS) and does not fail
the run.
"""

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from checker import Row, table  # noqa: E402
from scenarios import ABORT, BACKENDS, LOCK, Scenario, expected_failure, faults_for  # noqa: E402


def plan(backends, fault_filter=None, limits=(1,), every_n=True):
    """The (backend, fault, n) triples to run. Without every_n, limits above 1 only for the
    faults that take the semaphore's own paths (Fault.n2)."""
    wanted = [w.strip().lower() for w in (fault_filter or "").split(",") if w.strip()]
    out = []
    for backend in backends:
        for fault in faults_for(backend):
            if wanted and not any(w in fault.name.lower() for w in wanted):
                continue
            for n in limits:
                if n == 1 or every_n or fault.n2:
                    out.append((backend, fault, n))
    return out


def run_lane(name, lane, quota_of, workdir, options, report):
    """Runs scenarios of one backend in order on one server: lane holds (plan index, fault, n).
    Returns {plan index: row}."""
    rows = {}
    try:
        if ABORT.is_set():
            raise InterruptedError("interrupted")
        with BACKENDS[name]() as backend:
            for index, fault, n in lane:
                if ABORT.is_set():
                    break
                scenario = Scenario(backend, fault, n, quota_of(name), workdir, lock=options.lock,
                                    contenders=options.contenders, think=options.think,
                                    seed=options.seed + index, gap=options.gap)
                try:
                    row = scenario.run()
                except Exception as e:  # the harness's own trouble (a server that did not
                    row = scenario.row  # come back): this row fails, the next ones still run
                    row.problems.append(f"harness error: {type(e).__name__}: {e}")
                    traceback.print_exc()
                rows[index] = row
                report(row)
    except InterruptedError:
        why = "interrupted"
    except Exception as e:  # the server did not start
        why = f"{type(e).__name__}: {e}"
    else:
        why = "interrupted"
    for index, fault, n in lane:
        if index not in rows:
            rows[index] = Row(name, fault.name, n, expected=expected_failure(name, fault.name, n))
            rows[index].problems.append(f"not run: {why}")
    return rows


def lanes(triples, split=1):
    """Each backend's scenarios in plan order, dealt out to `split` lanes for the server backends
    (each lane gets a server of its own); the local backend's are quick and stay in one. Returns
    [(backend, [(plan index, fault, n), ...]), ...]."""
    out, seen = {}, {}
    for index, (name, fault, n) in enumerate(triples):
        ways = 1 if name == "local" else max(1, split)
        nth = seen[name] = seen.get(name, -1) + 1
        out.setdefault((name, nth % ways), []).append((index, fault, n))
    return [(key[0], lane) for key, lane in out.items()]


def run(triples, quota_of, options, workdir, progress=sys.stderr):
    """Runs the triples in lanes (see lanes(); options.split), options.jobs lanes side by side;
    returns the rows in plan order."""
    todo = lanes(triples, getattr(options, "split", 1))
    todo.sort(key=lambda lane: -len(lane[1]))  # the longest first, so the last ones end together
    printing = threading.Lock()

    def report(row):
        with printing:
            if progress:
                print(f"[chaos] {row.backend} / {row.fault} / n={row.n}: {row.sections} sections, "
                      f"{row.verdict} ({row.seconds:.0f}s)", file=progress, flush=True)

    results = {}
    pending = list(todo)

    def worker():
        while not ABORT.is_set():
            with printing:
                if not pending:
                    return
                name, lane = pending.pop(0)
            results.update(run_lane(name, lane, quota_of, workdir, options, report))

    threads = [threading.Thread(target=worker) for _ in range(max(1, options.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, lane in pending:  # lanes never started
        results.update(run_lane(name, lane, quota_of, workdir, options, report))
    return [results[i] for i in range(len(triples))]


def binaries(lock):
    """When lock and the companions beside it were last changed (None where there is none)."""
    out = []
    companions = [os.path.join(os.path.dirname(lock), c)
                  for c in ("lock-net", "lock-zookeeper", "lock-postgres")]
    for path in (lock, *companions):
        try:
            out.append(os.stat(path).st_mtime_ns)
        except OSError:
            out.append(None)
    return out


def arguments(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default="local,consul,etcd,zookeeper,postgres")
    p.add_argument("--faults", default="", help="comma-separated substrings of fault names")
    p.add_argument("--n", default="1", help="limits, comma-separated (default 1)")
    p.add_argument("--n2-only-where-it-matters", dest="every_n", action="store_false",
                   help="limits above 1 only for the faults that take the semaphore's paths")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quota", type=int, help="critical sections per scenario (default 30)")
    size.add_argument("--sections-per-backend", type=int,
                      help="critical sections per backend, spread over its scenarios")
    p.add_argument("--gap", type=int, default=None,
                   help="repeat the fault after this many sections (default: once per scenario)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--lock", default=LOCK, help="the lock binary (default build/lock or $LOCK_BIN)")
    p.add_argument("--workdir", help="where the logs go (default: a temporary directory, removed)")
    p.add_argument("--contenders", type=int, default=3)
    p.add_argument("--think", type=float, default=0.1,
                   help="a contender's longest pause between runs, in seconds")
    p.add_argument("--split", type=int, default=1,
                   help="lanes per server backend, each with a server of its own (default 1)")
    p.add_argument("--jobs", type=int, default=1, help="lanes run side by side (default 1)")
    args = p.parse_args(argv)
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for b in args.backends:
        if b not in BACKENDS:
            p.error(f"unknown backend {b!r}; known: {', '.join(BACKENDS)}")
    try:
        args.limits = [int(x) for x in args.n.split(",") if x.strip()]
    except ValueError:
        p.error(f"--n takes limits like 1,2, not {args.n!r}")
    if not args.limits or min(args.limits) < 1:
        p.error("--n: limits are 1 or more")
    args.lock = os.path.abspath(args.lock)
    if not os.access(args.lock, os.X_OK):
        p.error(f"{args.lock} is not an executable; build it or give --lock")
    return args


def main(argv=None):
    # ^C and SIGTERM wind down: every scenario stops what it started, then the table prints. (No
    # KeyboardInterrupt: one that lands in Thread.join() can leave is_alive() wrong.)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: ABORT.set())
    args = arguments(argv)
    triples = plan(args.backends, args.faults, args.limits, args.every_n)
    if not triples:
        print("no scenario matches", file=sys.stderr)
        return 2
    count = {b: sum(1 for t in triples if t[0] == b) for b in args.backends}
    if args.sections_per_backend:
        def quota_of(b):
            return -(-args.sections_per_backend // count[b])
    else:
        def quota_of(b):
            return args.quota or 30
    workdir = args.workdir or tempfile.mkdtemp(prefix="lock-chaos-")
    os.makedirs(workdir, exist_ok=True)
    built = binaries(args.lock)
    began = time.monotonic()
    try:
        rows = run(triples, quota_of, args, workdir)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(rows))
    print(f"wall time {time.monotonic() - began:.0f}s; lock: {args.lock}")
    if binaries(args.lock) != built:
        print(f"warning: {args.lock} or a companion of it was rebuilt during the run: runs that "
              "failed to start then say so, and the rows are of two builds")
    return 1 if ABORT.is_set() or any(r.failed for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
