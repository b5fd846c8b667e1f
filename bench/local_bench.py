#!/usr/bin/env python3
"""Measurements behind bench/local.sh: lock's local backend against flock(1) and GNU sem.

Every command is started the same way (posix_spawn of an absolute path, stdin and stdout on
/dev/null, stderr to a log file, then waitpid), so whatever the spawning costs is the same for
every tool. Run it through bench/local.sh, which prepares the temp directory and the tool paths.
"""
import argparse
import json
import math
import os
import resource
import statistics
import shutil
import subprocess
import sys
import time

import orphans

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def base_env(state_dir, home):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LOCK_", "CONSUL_", "PARALLEL"))}
    env.update(PATH=PATH, SHELL="/bin/sh", LOCK_STATE_DIR=state_dir, HOME=home, LC_ALL="C")
    return env


class Runner:
    """Starts one command and waits for it; counts failures and keeps their stderr."""

    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.failures = {}

    def actions(self, label):
        err = os.path.join(self.log_dir, "stderr." + label.replace(" ", "_").replace("/", "_"))
        return [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, err, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)]

    def run(self, label, argv, env, actions):
        """Returns the wall time (ms) of the command, and the CPU time (user + system, ms) of it
        and of all its descendants, those it left behind included (needs orphans.adopt())."""
        cpu_before, _ = children_usage()
        t0 = time.perf_counter_ns()
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
        _, status = os.waitpid(pid, 0)
        wall = (time.perf_counter_ns() - t0) / 1e6
        if os.waitstatus_to_exitcode(status) != 0:
            self.failures[label] = self.failures.get(label, 0) + 1
        orphans.reap()
        cpu_after, _ = children_usage()
        return wall, cpu_after - cpu_before


def children_usage():
    """CPU time (user + system, ms) and context switches of all the children reaped so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru.ru_utime + ru.ru_stime) * 1e3, ru.ru_nvcsw + ru.ru_nivcsw


def pct(values, p):
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


# ---------------------------------------------------------------------------------------------
# 1. Uncontended: one invocation at a time, variants interleaved round-robin.

def uncontended(runner, variants, reps, warmup):
    times = {label: [] for label, _, _ in variants}
    cpu = {label: [] for label, _, _ in variants}
    prepared = [(label, argv, env, runner.actions(label)) for label, argv, env in variants]
    for i in range(warmup + reps):
        k = i % len(prepared)  # rotate the order so no variant always runs right after another
        for label, argv, env, actions in prepared[k:] + prepared[:k]:
            dt, c = runner.run(label, argv, env, actions)
            if i >= warmup:
                times[label].append(dt)
                cpu[label].append(c)
    return times, cpu


# ---------------------------------------------------------------------------------------------
# 2 and 3. Contended: N forked worker processes, each running R rounds of the command back to
# back, all released at once; each records when every one of its rounds ended, and what they all
# cost (CPU time and context switches, of the commands and of whatever they left behind).

def contend(runner, label, argv, env, contenders, rounds, work_dir):
    actions = runner.actions(label)
    start_r, start_w = os.pipe()
    pids, outs = [], []
    for c in range(contenders):
        out = os.path.join(work_dir, f"worker.{c}.json")
        outs.append(out)
        pid = os.fork()
        if pid == 0:
            try:
                os.close(start_w)
                orphans.adopt()
                os.read(start_r, 1)  # EOF once the parent lets everybody go
                ends, fails = [], 0
                for _ in range(rounds):
                    p = os.posix_spawn(argv[0], argv, env, file_actions=actions)
                    _, st = os.waitpid(p, 0)
                    fails += os.waitstatus_to_exitcode(st) != 0
                    ends.append(time.monotonic_ns())
                # Reaped only now, so that no round waits for what the one before left behind.
                orphans.reap()
                cpu_ms, switches = children_usage()  # a fork starts with none
                with open(out, "w") as f:
                    json.dump({"ends": ends, "fails": fails, "cpu_ms": cpu_ms,
                               "switches": switches}, f)
            finally:
                os._exit(0)
        pids.append(pid)
    os.close(start_r)
    time.sleep(0.05)  # let every worker reach its read()
    t0 = time.monotonic_ns()
    os.close(start_w)
    for pid in pids:
        os.waitpid(pid, 0)
    results = []
    for out in outs:
        with open(out) as f:
            results.append(json.load(f))
        os.unlink(out)
    fails = sum(r["fails"] for r in results)
    if fails:
        runner.failures[label] = runner.failures.get(label, 0) + fails
    ends = [r["ends"] for r in results]
    t_end = max(e[-1] for e in ends)
    wall = (t_end - t0) / 1e9
    total = contenders * rounds
    first_done = min(e[-1] for e in ends)
    done_then = sorted(sum(1 for t in e if t <= first_done) for e in ends)
    return {
        "wall_s": wall,
        "rate": total / wall,
        "acquisitions": total,
        "cpu_ms_per_acq": sum(r["cpu_ms"] for r in results) / total,
        "switches_per_acq": sum(r["switches"] for r in results) / total,
        # when the first contender had finished all its rounds: how far the others had got
        "done_when_first_finished": done_then,
        "first_finish_frac": (first_done - t0) / (t_end - t0),
    }


def run_trials(runner, specs, trials, contenders, work_dir):
    """specs: [(label, argv, env, rounds, trials_for_it)]; trials interleave between specs."""
    res = {label: [] for label, *_ in specs}
    for t in range(trials):
        for label, argv, env, rounds, n in specs:
            if t < n:
                res[label].append(contend(runner, label, argv, env, contenders, rounds, work_dir))
    return res


def median_trial(trials):
    return sorted(trials, key=lambda r: r["rate"])[len(trials) // 2]


def fmt_fair(r, rounds):
    d = r["done_when_first_finished"]
    return (f"first contender done at {100 * r['first_finish_frac']:.0f}% of the run; "
            f"rounds done by each then (of {rounds}): min {d[0]}, median {d[len(d) // 2]}, max {d[-1]}")


# ---------------------------------------------------------------------------------------------

def print_trials(label, trials, rounds, ncpu):
    r = median_trial(trials)
    rates = ", ".join(f"{x['rate']:.1f}" for x in trials)
    print(f"   {label:<30} {r['rate']:7.1f} acquisitions/s  ({r['acquisitions']} in "
          f"{r['wall_s']:.2f} s, {1000 / r['rate']:.1f} ms each; all trials: {rates}/s)")
    print(f"   {'':<30} CPU {r['cpu_ms_per_acq']:.2f} ms per acquisition: on {ncpu} CPUs at "
          f"most {ncpu * 1000 / r['cpu_ms_per_acq']:.0f}/s if CPU-bound; "
          f"{r['switches_per_acq']:.1f} context switches")
    print(f"   {'':<30} fairness: {fmt_fair(r, rounds)}")


def syscalls(argv, env, work):
    """System calls of one run of argv, its whole process tree's (strace -f -c), fewest of three;
    None without strace."""
    strace = shutil.which("strace")
    if not strace:
        return None
    out = os.path.join(work, "strace.txt")
    counts = []
    for _ in range(3):
        subprocess.run([strace, "-f", "-qq", "-c", "-o", out, *argv], env=env, check=False,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        orphans.reap()  # what the traced run left behind, so that no later run counts it
        with open(out) as f:
            total = [line.split() for line in f if line.split()[-1:] == ["total"]]
        if total:
            counts.append(int(total[0][3]))  # % time, seconds, usecs/call, calls, [errors,] total
    return min(counts) if counts else None


def libs(path):
    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, check=False).stdout
    except OSError:
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lock", required=True)
    ap.add_argument("--flock", default="")
    ap.add_argument("--sem", default="")
    ap.add_argument("--work", required=True, help="temp directory for all state")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--contenders", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--sem-rounds", type=int, default=3)
    ap.add_argument("--trials", type=int, default=3)
    a = ap.parse_args()
    orphans.adopt()

    state = os.path.join(a.work, "state")
    home = os.path.join(a.work, "home")
    logs = os.path.join(a.work, "logs")
    for d in (state, home, logs):
        os.makedirs(d, exist_ok=True)
    os.makedirs(os.path.join(home, ".parallel"), exist_ok=True)
    open(os.path.join(home, ".parallel", "will-cite"), "w").close()  # no citation notice
    env = base_env(state, home)
    lockfile = os.path.join(a.work, "flock.file")
    open(lockfile, "w").close()
    sh = "/bin/sh"
    true_bin = "/usr/bin/true" if os.path.exists("/usr/bin/true") else "/bin/true"
    runner = Runner(logs)
    summary = []  # (what, lock, other, ratio, floor, lock / floor): "-" and None where none applies

    # 1 ----------------------------------------------------------------------------------------
    print(f"== 1. Uncontended: start-to-finish wall time of one invocation "
          f"({a.reps} runs each after {a.warmup} warm-up, variants interleaved)")
    print(f"   child 'true'; SHELL=/bin/sh ({os.path.realpath(sh)}); PATH={PATH}")
    print("   'lock p true' runs the child through the shell (/bin/sh -c true, as consul lock does);")
    print("   'flock FILE true' execs true directly, as does 'lock -shell=false p true'.")
    print("   'flock FILE sh -c true' is flock paying for the same shell, for a like-for-like row.")
    floor = "exec true (floor)"  # what no tool that runs the child can go below
    variants = [(floor, [true_bin], env)]
    if a.flock:
        variants += [("flock FILE true", [a.flock, lockfile, "true"], env),
                     ("flock FILE sh -c true", [a.flock, lockfile, sh, "-c", "true"], env)]
    variants += [("lock p true", [a.lock, "p", "true"], env),
                 ("lock -shell=false p true", [a.lock, "-shell=false", "p", "true"], env)]
    t_start = time.monotonic()
    times, cpu = uncontended(runner, variants, a.reps, a.warmup)
    print(f"   {'variant':<28}{'median ms':>10}{'p90 ms':>9}{'min ms':>9}{'max ms':>9}"
          f"{'CPU ms':>9}")
    for label, _, _ in variants:
        xs = times[label]
        print(f"   {label:<28}{statistics.median(xs):>10.2f}{pct(xs, 90):>9.2f}"
              f"{min(xs):>9.2f}{max(xs):>9.2f}{statistics.median(cpu[label]):>9.2f}")
    print("   (CPU ms: median user+system time of the command and all its descendants, lock's")
    print("    watchdog included, which ends a moment after lock and is reaped by this bench;")
    print("    wall time above it is spent waiting: on the kernel, on other processes, on the disk)")
    med = {k: statistics.median(v) for k, v in times.items()}
    p90 = {k: pct(v, 90) for k, v in times.items()}
    if a.flock:
        f = "flock FILE true"
        print("   ratios of medians (p90):")
        for l, o in [("lock p true", f), ("lock -shell=false p true", f),
                     ("lock p true", "flock FILE sh -c true")]:
            print(f"     {l} / {o}: {med[l] / med[o]:.2f}x ({p90[l] / p90[o]:.2f}x)")
            summary.append((f"uncontended median, {l} vs {o}", f"{med[l]:.2f} ms",
                            f"{med[o]:.2f} ms", med[l] / med[o], f"{med[floor]:.2f} ms", med[l] / med[floor]))
        for l in ("lock p true", "lock -shell=false p true"):
            summary.append((f"uncontended p90, {l} vs {f}", f"{p90[l]:.2f} ms",
                            f"{p90[f]:.2f} ms", p90[l] / p90[f], f"{p90[floor]:.2f} ms", p90[l] / p90[floor]))
        cl, cf, c0 = (statistics.median(cpu[k]) for k in ("lock -shell=false p true", f, floor))
        summary.append((f"uncontended CPU, lock -shell=false p true vs {f}", f"{cl:.2f} ms",
                        f"{cf:.2f} ms", cl / cf, f"{c0:.2f} ms", cl / c0))
    else:
        print("   flock not found: no comparison")
        for l in ("lock p true", "lock -shell=false p true"):
            summary.append((f"uncontended median, {l} (flock missing)", f"{med[l]:.2f} ms",
                            "n/a", None, f"{med[floor]:.2f} ms", med[l] / med[floor]))
    counted = {label: syscalls(argv, e, a.work) for label, argv, e in variants}
    if None not in counted.values():
        print("   system calls per run (strace -f -c, fewest of 3; the whole tree, the child's own "
              "included):")
        for label, _, _ in variants:
            print(f"     {label:<28}{counted[label]:>6}")
        if a.flock:
            l, f = "lock -shell=false p true", "flock FILE true"
            summary.append((f"system calls, {l} vs {f}", str(counted[l]), str(counted[f]),
                            counted[l] / counted[f], str(counted[floor]), counted[l] / counted[floor]))
    else:
        print("   strace not found: no system call counts")
    print(f"   ({time.monotonic() - t_start:.0f} s)")
    print()

    # 2 ----------------------------------------------------------------------------------------
    C, R = a.contenders, a.rounds
    ncpu = os.cpu_count() or 1
    print(f"== 2. Contended lock: {C} contender loops x {R} rounds on one lock, "
          f"{a.trials} trials each, interleaved; median trial shown")
    t_start = time.monotonic()
    # Like for like, as in section 1: each tool's child exec'd directly, and both through the shell.
    pairs = [("lock -shell=false p true", [a.lock, "-shell=false", "p", "true"],
              "flock FILE true", [a.flock, lockfile, "true"]),
             ("lock p true", [a.lock, "p", "true"],
              "flock FILE sh -c true", [a.flock, lockfile, sh, "-c", "true"])]
    specs = []
    for l, largv, f, fargv in pairs:
        specs.append((f"{l} [contended]", largv, env, R, a.trials))
        if a.flock:
            specs.append((f"{f} [contended]", fargv, env, R, a.trials))
    res = run_trials(runner, specs, a.trials, C, a.work)
    for label, *_ in specs:
        print_trials(label, res[label], R, ncpu)
    for l, _, f, _ in pairs:
        rl = median_trial(res[f"{l} [contended]"])
        if not a.flock:
            summary.append((f"contended acquisitions/s, {l} (flock missing)", f"{rl['rate']:.0f}/s",
                            "n/a", None, "-", None))
            continue
        rf = median_trial(res[f"{f} [contended]"])
        print(f"   throughput ratio {l} / {f}: {rl['rate'] / rf['rate']:.2f}x")
        summary.append((f"contended acquisitions/s, {l} vs {f}",
                        f"{rl['rate']:.0f}/s", f"{rf['rate']:.0f}/s", rl["rate"] / rf["rate"], "-", None))
    if a.flock:  # what the first pair's acquisitions cost, and how fair they were
        l, _, f, _ = pairs[0]
        rl, rf = median_trial(res[f"{l} [contended]"]), median_trial(res[f"{f} [contended]"])
        summary.append((f"contended CPU per acquisition, {l} vs {f}",
                        f"{rl['cpu_ms_per_acq']:.2f} ms", f"{rf['cpu_ms_per_acq']:.2f} ms",
                        rl["cpu_ms_per_acq"] / rf["cpu_ms_per_acq"], "-", None))
        summary.append(("contended context switches per acquisition, lock vs flock",
                        f"{rl['switches_per_acq']:.1f}", f"{rf['switches_per_acq']:.1f}",
                        rl["switches_per_acq"] / rf["switches_per_acq"], "-", None))
        dl, df = rl["done_when_first_finished"], rf["done_when_first_finished"]
        summary.append(("fairness: fewest rounds done by a contender when first finished",
                        f"{dl[0]}/{R}", f"{df[0]}/{R}", None, "-", None))
    print(f"   ({time.monotonic() - t_start:.0f} s)")
    print()

    # 3 ----------------------------------------------------------------------------------------
    sem_id = f"lockbench{os.getpid()}"
    print(f"== 3. Semaphore with 2 slots: {C} contender loops; lock -n 2 does {R} rounds each, "
          f"sem (slow to start) {a.sem_rounds}")
    if a.sem:
        print(f"   sem runs as 'sem --fg -j 2 --id {sem_id} true' with a private HOME, so that it "
              "waits for the command like lock does")
    t_start = time.monotonic()
    specs = [("lock -n 2 p true [contended]", [a.lock, "-n", "2", "p", "true"], env, R, a.trials)]
    if a.sem:
        specs.append(("sem -j 2 true [contended]",
                      [a.sem, "--fg", "-j", "2", "--id", sem_id, "true"], env, a.sem_rounds, 1))
    res = run_trials(runner, specs, a.trials, C, a.work)
    for label, _, _, rounds, _ in specs:
        print_trials(label, res[label], rounds, ncpu)
    if a.sem:
        rl = median_trial(res["lock -n 2 p true [contended]"])
        rs = median_trial(res["sem -j 2 true [contended]"])
        print(f"   rate ratio lock/sem: {rl['rate'] / rs['rate']:.1f}x")
        summary.append(("semaphore -n 2 acquisitions/s, lock vs sem (higher is better)",
                        f"{rl['rate']:.0f}/s", f"{rs['rate']:.1f}/s", rl["rate"] / rs["rate"], "-", None))
        subprocess.run([a.sem, "--wait", "--id", sem_id], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
    else:
        print("   sem (GNU parallel) not found: lock measured alone")
        rl = median_trial(res["lock -n 2 p true [contended]"])
        summary.append(("semaphore -n 2 acquisitions/s, lock (sem missing)", f"{rl['rate']:.0f}/s",
                        "n/a", None, "-", None))
    print(f"   ({time.monotonic() - t_start:.0f} s)")
    print()

    # 4 ----------------------------------------------------------------------------------------
    print("== 4. Shared libraries loaded at start (ldd)")
    ll = libs(a.lock)
    print(f"   lock  ({a.lock}): {len(ll)}")
    for line in ll:
        print(f"     {line}")
    if a.flock:
        fl = libs(a.flock)
        print(f"   flock ({a.flock}): {len(fl)}")
        for line in fl:
            print(f"     {line}")
        summary.append(("shared libraries (ldd lines)", str(len(ll)), str(len(fl)), None, "-", None))
    else:
        summary.append(("shared libraries (ldd lines)", str(len(ll)), "n/a", None, "-", None))
    net = [l for l in ll if any(n in l for n in ("ssl", "crypto", "curl", "zookeeper", "grpc",
                                                    "nghttp", "resolv", "gss", "krb"))]
    print("   network/TLS libraries in lock's list: " + (", ".join(net) if net else "none"))
    print()

    leftovers = [n for n in os.listdir(state) if n != "@fence"]  # the token counter stays by design
    if leftovers:
        print(f"!! lock left state behind in its state directory: {leftovers}")
    if runner.failures:
        print("!! some runs failed (non-zero exit):")
        for label, n in runner.failures.items():
            print(f"   {label}: {n}")
        for name in sorted(os.listdir(logs)):
            with open(os.path.join(logs, name), errors="replace") as f:
                tail = f.read().splitlines()[-3:]
            for line in tail:
                print(f"   {name}: {line}")
        print()

    with open("/proc/loadavg") as f:
        print("   load average at the end: " + " ".join(f.read().split()[:3]) +
              f" on {os.cpu_count()} CPUs (other work on the machine inflates every number)")
        print()

    # Summary ----------------------------------------------------------------------------------
    print("== Summary (medians; ratio = lock / other, so < 1 is faster for times, > 1 is better "
          "for rates; floor: exec of the child alone)")
    w = max([len(s[0]) for s in summary] + [10])
    print(f"   {'measure':<{w}}  {'lock':>11}  {'other':>11}  {'ratio':>7}  {'floor':>9}  {'x floor':>7}")
    as_x = lambda x: f"{x:.2f}x" if x is not None else "-"  # noqa: E731
    for what, l, o, ratio, fl, x_floor in summary:
        print(f"   {what:<{w}}  {l:>11}  {o:>11}  {as_x(ratio):>7}  {fl:>9}  {as_x(x_floor):>7}")
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
