#!/usr/bin/env python3
"""Measurements behind bench/consul.sh: `lock` against the Go client's `consul lock` (the
consul_peer.py port of api.Lock, api.Semaphore and command/lock) on one Consul HTTP API double.

    consul_bench.py --lock PATH [--runs N] [--measure requests|loss|all] [--tool lock|peer|both]
                    [--n 1,3]

requests: API requests per uncontended acquisition (start, acquire, run /bin/true, release,
          clean up), counted by the double; median of the runs, with the breakdown of one run.
loss:     from the operator's session destroy to the moment the child's SIGTERM handler runs;
          median (and spread) of the runs.
all:      both, and lock's peak RSS in an uncontended run (the most of 5 runs).
Whenever lock is measured, a summary table ends the output: no floor, the double being no Consul
to time requests against, and no peer's memory, the peer being a port of Go's client, not the Go
program.

Every line names the command it measured and the command that reproduces that line alone.
"""
import argparse
import collections
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "consul_double"))
from fixture import ConsulDouble  # noqa: E402
from etcd_bench import peak_rss_mb  # noqa: E402
from summary_table import print_summary  # noqa: E402

PEER = os.path.join(ROOT, "tests", "consul_double", "consul_peer.py")

# The child of the loss runs: a Python handler runs as soon as the signal arrives (a shell trap
# would wait for its current foreground command), and it stamps the wall clock the bench shares.
TERM_CHILD = """import os, signal, sys, time
def on_term(*_):
    with open(sys.argv[2], "w") as f:
        f.write(repr(time.time()))
    os._exit(0)
signal.signal(signal.SIGTERM, on_term)
with open(sys.argv[1], "w") as f:
    f.write(str(os.getpid()))
while True:
    signal.pause()
"""


def rel(path):
    return os.path.relpath(path, os.getcwd()) if path.startswith(ROOT) else path


class Bench:
    def __init__(self, lock, consul, runs):
        self.lock, self.consul, self.runs = lock, consul, runs
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("LOCK_", "CONSUL_"))}
        self.env.update(SHELL="/bin/sh", CONSUL_HTTP_ADDR=consul.http_addr)
        self.tmp = tempfile.mkdtemp(prefix="consul-bench-")
        self.serial = 0

    def argv(self, tool, n, prefix, child):
        if tool == "lock":
            return [self.lock, "-n", str(n), "-shell=false", prefix, *child]
        return [sys.executable, PEER, "-n", str(n), "-shell=false", prefix, *child]

    @staticmethod
    def shown(argv):
        """The command as a user would type it, with the double's address as a variable."""
        words = [rel(w) for w in argv]
        if words[0] == sys.executable:
            words[0] = "python3"
        return "CONSUL_HTTP_ADDR=$ADDR " + " ".join(shlex.quote(w) for w in words)

    def prefix(self, what):
        self.serial += 1
        return f"bench/{what}-{self.serial}"

    def wait_no_sessions(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while self.consul.sessions():
            if time.monotonic() > deadline:
                sys.exit("a session was left behind")
            time.sleep(0.01)

    def requests(self, tool, n):
        """Requests per acquisition: (median, breakdown and connections of the median run,
        command)."""
        counts, breakdowns, connections, shown = [], [], [], None
        for _ in range(self.runs):
            argv = self.argv(tool, n, self.prefix(f"requests-n{n}"), ["/bin/true"])
            shown = self.shown(argv)
            self.wait_no_sessions()
            self.consul.clear_requests()
            r = subprocess.run(argv, env=self.env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                sys.exit(f"{shown} failed (exit {r.returncode}): {r.stderr.strip()}")
            seen = self.consul.requests()  # before the bench's own check below adds one
            self.wait_no_sessions()
            counts.append(len(seen))
            breakdowns.append(collections.Counter(kind(q) for q in seen))
            connections.append(len({q["connection"] for q in seen}))
        median = statistics.median_low(counts)
        at = counts.index(median)
        return median, breakdowns[at], connections[at], shown

    def loss(self, tool, n):
        """Milliseconds from session destroy to SIGTERM in the child: (list, command)."""
        took, shown = [], None
        for i in range(self.runs):
            pid_file = os.path.join(self.tmp, f"pid.{self.serial}")
            term_file = os.path.join(self.tmp, f"term.{self.serial}")
            child = [sys.executable, "-c", TERM_CHILD, pid_file, term_file]
            argv = self.argv(tool, n, self.prefix(f"loss-n{n}"), child)
            shown = self.shown(argv[:-5] + ["CHILD"])
            self.wait_no_sessions()
            p = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                wait_file(pid_file, p)
                sessions = self.consul.sessions()
                if len(sessions) != 1:
                    sys.exit(f"expected one session, found {len(sessions)}")
                destroyed = time.time()
                self.consul.session_destroy(sessions[0]["ID"])
                wait_file(term_file, p)
                with open(term_file) as f:
                    took.append((float(f.read()) - destroyed) * 1e3)
                p.wait(timeout=30)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                p.stderr.close()
        return took, shown


def kind(request):
    """A request as "METHOD /v1/endpoint" with the session ID, key and index taken out, and
    whether it was a blocking query."""
    path = re.sub(r"^/v1/kv/.*", "/v1/kv/KEY", request["path"])
    path = re.sub(r"/v1/session/(destroy|renew|info)/.*", r"/v1/session/\1/ID", path)
    params = [p.split("=")[0] for p in request["query"].split("&") if p]
    flags = [p for p in ("acquire", "release", "cas", "recurse", "consistent", "index", "wait")
             if p in params]
    return f"{request['method']} {path}" + (f"?{'&'.join(flags)}" if flags else "")


def wait_file(path, proc, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not (os.path.exists(path) and os.path.getsize(path) > 0):
        if proc.poll() is not None:
            sys.exit(f"the holder ended early (exit {proc.returncode}): {proc.stderr.read()}")
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {path}")
        time.sleep(0.001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lock", required=True)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--measure", choices=("requests", "loss", "all"), default="all")
    ap.add_argument("--tool", choices=("lock", "peer", "both"), default="both")
    ap.add_argument("--n", default="1,3", help="comma-separated holder limits")
    a = ap.parse_args()
    tools = ["lock", "peer"] if a.tool == "both" else [a.tool]
    limits = [int(x) for x in a.n.split(",")]
    names = {"lock": "lock", "peer": "Go client (consul_peer.py)"}
    me = ["python3", rel(os.path.abspath(__file__)), "--lock", rel(os.path.abspath(a.lock)),
          "--runs", str(a.runs)]

    def reproduce(measure, tool, n):
        return " ".join(me + ["--measure", measure, "--tool", tool, "--n", str(n)])

    summary = []
    with ConsulDouble() as consul:
        bench = Bench(os.path.abspath(a.lock), consul, a.runs)
        print(f"== Consul double at {consul.http_addr} (ADDR below); {a.runs} runs per line")
        if a.measure in ("requests", "all"):
            print("\n== API requests and TCP connections per acquisition, uncontended (the double's "
                  "request log; median run; the peer opens a connection per request, where Go's "
                  "client keeps them alive)")
            for n in limits:
                row = [f"requests, -n {n}", None, None, None, 0]
                for tool in tools:
                    median, breakdown, connections, shown = bench.requests(tool, n)
                    row[1 if tool == "lock" else 2] = median
                    print(f"   -n {n}  {names[tool]:27} {median:3d} requests on {connections} connection(s)")
                    for what, count in sorted(breakdown.items()):
                        print(f"            {count:3d}  {what}")
                    print(f"          measured:  {shown}")
                    print(f"          reproduce: {reproduce('requests', tool, n)}")
                summary.append(row)
        if a.measure in ("loss", "all"):
            print("\n== Session destroyed -> SIGTERM in the child, ms: median (min-max)")
            for n in limits:
                row = [f"loss to SIGTERM, -n {n}, ms", None, None, None, 1]
                for tool in tools:
                    took, shown = bench.loss(tool, n)
                    median = statistics.median(took)
                    row[1 if tool == "lock" else 2] = median
                    print(f"   -n {n}  {names[tool]:27} {median:7.1f} ms "
                          f"({min(took):.1f}-{max(took):.1f})")
                    print(f"          measured:  {shown} (CHILD: a SIGTERM handler stamping "
                          "the time); the bench then destroys its session")
                    print(f"          reproduce: {reproduce('loss', tool, n)}")
                summary.append(row)
        if a.measure == "all" and "lock" in tools:
            argv = bench.argv("lock", 1, bench.prefix("rss"), ["/bin/true"])
            rss = max(peak_rss_mb(argv, bench.env) for _ in range(5))
            print(f"\n== Peak RSS of an uncontended run, the most of 5: lock {rss:.1f} MB")
            print(f"          measured:  {bench.shown(argv)}")
            summary.append(["peak RSS, MB", rss, None, None, 1])
        if "lock" in tools:
            print_summary("lock against the Go client's port (peer)", summary)
        everything = me + ["--measure", a.measure, "--tool", a.tool, "--n", a.n]
        print(f"\nreproduce all: {' '.join(everything)}")


if __name__ == "__main__":
    main()
