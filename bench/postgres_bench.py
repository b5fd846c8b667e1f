#!/usr/bin/env python3
"""Measurements behind bench/postgres.sh: `lock -backend postgres` against withlock (npm
advisory-lock 2.0.0) and psql-lock, the wrapper a team writes by hand (PSQL_LOCK below), on one
PostgreSQL server started here (tests/e2e/postgres_server.py).

The three take the same advisory lock for a name (pg_layout.hpp), so they exclude each other,
which the bench shows too, all three on one name at once. Each is started the same way
(posix_spawn, stdio on /dev/null, then wait4) and interleaved, run by run or trial by trial, so
that a machine whose speed drifts, or that others use meanwhile, slows each alike; ratios are
taken between neighbours (per pair), then their median.

The server's CPU is the postmaster's own, that of the children it has reaped (a session's backend,
once the session ends) and that of those still running (ServerCpu). /proc counts it in clock ticks
of 10 ms, about one run's share: it is summed over every run of a tool, never read for one alone.
"""
import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from ab import cpu_of_children, one_run  # noqa: E402
from etcd_bench import peak_rss_mb, run  # noqa: E402
import orphans  # noqa: E402
from postgres_server import PSQL, WITHLOCK, PostgresServer, withlock_key  # noqa: E402
from summary_table import print_summary  # noqa: E402

# psql-lock NAME COMMAND [ARG...]: what a team writes by hand. One psql session, a coprocess of
# the shell, takes the name's advisory lock (withlock's key, derived in SQL as pg_layout.hpp
# shows) and keeps its session open while the shell runs the command; then it unlocks, and the
# shell exits with the command's status. Run as `bash -c "$PSQL_LOCK" psql-lock NAME COMMAND...`.
PSQL_LOCK = r"""
name=$1; shift
coproc PG { exec psql -X -q -A -t -v ON_ERROR_STOP=1 -v name="$name"; }
to_psql=${PG[1]} from_psql=${PG[0]}
key="SELECT ('x' || encode(substring(h, 4, 1) || substring(h, 3, 1) || substring(h, 2, 1)
                           || substring(h, 1, 1), 'hex'))::bit(32)::int4 AS k1,
            ('x' || encode(substring(h, 8, 1) || substring(h, 7, 1) || substring(h, 6, 1)
                           || substring(h, 5, 1), 'hex'))::bit(32)::int4 AS k2
     FROM (SELECT sha256(convert_to(:'name', 'UTF8')) AS h) d"
echo "SELECT 'locked' FROM ($key) k, pg_advisory_lock(k1, k2);" >&"$to_psql"
read -r reply <&"$from_psql"
[[ $reply == locked ]] || exit 1  # psql has said why on stderr
"$@"
status=$?
echo "SELECT pg_advisory_unlock(k1, k2) FROM ($key) k;" >&"$to_psql"
exec {to_psql}>&-
wait
exit $status
"""

# The server's own processes, by the title each gives itself; every other child of the postmaster
# is a session's backend (or one being forked, which still bears the postmaster's command line).
AUXILIARY = tuple(f"postgres: {name}" for name in (
    "checkpointer", "background writer", "walwriter", "autovacuum launcher",
    "logical replication launcher", "startup", "archiver", "walreceiver"))


def psql_lock(name, *command):
    return ["/bin/bash", "-c", PSQL_LOCK, "psql-lock", name, *command]


def withlock(name, *command):
    return [WITHLOCK, name, "--", *command]


def client_env(pg):
    """What a user's shell would have to reach the server: libpq's variables, withlock's URL (its
    rest from those variables) and lock's backend."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCK_", "CONSUL_", "PG"))}
    return dict(pg.env(env), SHELL="/bin/sh", PG_CONNECTION_STRING="postgresql://",
                PGPASSFILE="/nonexistent")


def stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


class ServerCpu:
    """The CPU a PostgreSQL server has used so far, and its sessions' backends, read from /proc."""

    def __init__(self, pid):
        self.pid = pid

    def children(self):
        with open(f"/proc/{self.pid}/task/{self.pid}/children") as f:
            return [int(p) for p in f.read().split()]

    def seconds(self):
        """Read while no session comes or goes: a backend reaped between the reads is missed."""
        fields = stat_fields(self.pid)
        ticks = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
        for child in self.children():
            try:
                fields = stat_fields(child)
            except OSError:
                continue
            ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def sessions(self):
        out = []
        for child in self.children():
            try:
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    title = f.read().decode(errors="replace")
            except OSError:
                continue
            if not title.startswith(AUXILIARY):
                out.append(child)
        return out

    def wait_quiet(self, limit=30.0):
        """Waits until every session's backend has ended and been reaped: a client's exit only
        starts its backend's."""
        deadline = time.monotonic() + limit
        delay = 0.0005
        while self.sessions():
            if time.monotonic() > deadline:
                sys.exit(f"sessions still connected {limit} s after the runs: {self.sessions()}")
            time.sleep(delay)
            delay = min(delay * 2, 0.02)


class StatementLog:
    """The statements the server logs for the tests' role: log_statement = all is set for that role
    alone (its new sessions), so the fixture's own queries are not among them. PostgreSQL logs a
    simple query as `statement:` and an extended-protocol one (libpq's with parameters) as
    `execute`, once each."""

    def __init__(self, pg):
        self.pg = pg
        self.line = re.compile(
            rf"\[(\d+)\] {re.escape(pg.user)}@{re.escape(pg.dbname)} LOG:  (?:statement|execute)".encode())
        self.offset = 0

    def __enter__(self):
        self.pg.sql(f"ALTER ROLE {self.pg.user} SET log_statement = 'all'")
        self.offset = os.path.getsize(self.pg.log_path)
        return self

    def __exit__(self, *exc):
        self.pg.sql(f"ALTER ROLE {self.pg.user} RESET log_statement")

    def read(self):
        """(statements, sessions) logged since the last read; read once the sessions are gone,
        which wrote their lines before they ended."""
        with open(self.pg.log_path, "rb") as f:
            f.seek(self.offset)
            text = f.read()
        self.offset += len(text)
        pids = [m.group(1) for m in self.line.finditer(text)]
        return len(pids), len(set(pids))


def in_own_process(measure):
    """Runs measure() in a process of its own, which adopts what the runs leave behind and owns
    nothing else (not the server, which orphans.reap() would wait for); returns its result, which
    must be JSON."""
    r, w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            orphans.adopt()
            with os.fdopen(w, "w") as out:
                json.dump(measure(), out)
            code = 0
        except BaseException as e:  # noqa: BLE001 - whatever it is, the parent reports it
            print(f"postgres_bench.py: {e}", file=sys.stderr)
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status):
        sys.exit(1)
    return json.loads(text)


def uncontended(tools, env, server, reps, warmup):
    """Each tool run after the other, in an order that turns each round, one at a time, the server
    quiet before each: per tool the wall and CPU ms of each run, and the server's CPU seconds over
    all of them."""
    def measure():
        got = {name: {"wall": [], "cpu": [], "server": 0.0} for name in tools}
        names = list(tools)
        for i in range(warmup + reps):
            k = i % len(names)
            for name in names[k:] + names[:k]:
                server.wait_quiet()
                before = server.seconds()
                wall, cpu = one_run(tools[name], env)
                server.wait_quiet()
                if i >= warmup:  # the first runs warm the caches
                    got[name]["wall"].append(wall)
                    got[name]["cpu"].append(cpu)
                    got[name]["server"] += server.seconds() - before
        return got
    return in_own_process(measure)


def at_once(readies):
    """Forks a process per ready(), which returns its work (a function that returns how many of
    its runs failed); they all start at once. Returns the seconds until all ended and whether none
    failed."""
    go_r, go_w = os.pipe()
    pids = []
    for ready in readies:
        pid = os.fork()
        if pid == 0:
            failed = True
            try:
                os.close(go_w)
                orphans.adopt()
                work = ready()
                os.read(go_r, 1)
                failed = work()
                orphans.reap()
            finally:
                os._exit(1 if failed else 0)  # never back into the parent's code
        pids.append(pid)
    os.close(go_r)
    t0 = time.perf_counter()
    os.close(go_w)  # everyone starts now
    ok = all(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) == 0 for p in pids)
    return time.perf_counter() - t0, ok


def runs_of(argv, env, rounds):
    def ready():
        return lambda: sum(run(argv, env)[1] != 0 for _ in range(rounds))
    return ready


def burst(argvs, env, rounds, server):
    """Contenders on one name, one per argv, all at once, each running its argv `rounds` times:
    acquisitions per second (each but the first a handoff), whether none failed, and the client
    CPU (the tools, their children, the harness) and the server's CPU per acquisition, in ms."""
    server.wait_quiet()
    clients, cpu = cpu_of_children(), server.seconds()
    took, ok = at_once([runs_of(argv, env, rounds) for argv in argvs])
    client = cpu_of_children() - clients
    server.wait_quiet()
    n = len(argvs) * rounds
    return n / took, ok, client / n, (server.seconds() - cpu) / n * 1e3


def pairs_script(directory, key, pairs):
    """A psql script of `pairs` lock and unlock statements on `key`: the floor, one session."""
    path = os.path.join(directory, f"pairs-{pairs}.sql")
    with open(path, "w") as f:
        f.write(f"SELECT pg_advisory_lock({key[0]}, {key[1]});\n"
                f"SELECT pg_advisory_unlock({key[0]}, {key[1]});\n" * pairs)
    return path


def in_session_ms(env, directory, key, pairs):
    """The floor of one run: a lock and an unlock on a session already open, in ms, from psql
    scripts of 1 and pairs + 1 of them, run in turn five times: (T(pairs + 1) - T(1)) / pairs."""
    one, many = [pairs_script(directory, key, n) for n in (1, pairs + 1)]
    times = {one: [], many: []}
    for _ in range(5):
        for script in times:
            ms, code = run([PSQL, "-X", "-q", "-o", "/dev/null", "-f", script], env)
            if code != 0:
                sys.exit(f"psql -f {script} failed (exit {code})")
            times[script].append(ms)
    return (statistics.median(times[many]) - statistics.median(times[one])) / pairs


def median_ratio(ours, theirs):
    """NaN where the server's CPU, counted in ticks, was too small to see (tiny settings)."""
    ratios = [a / b for a, b in zip(ours, theirs) if b > 0]
    return statistics.median(ratios) if ratios else float("nan")


def ratio(ours, theirs):
    return ours / theirs if theirs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lock", required=True)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--contenders", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--trials", type=int, default=3)
    a = ap.parse_args()

    with PostgresServer() as pg, tempfile.TemporaryDirectory(prefix="lock-pg-bench-") as scratch:
        env = dict(client_env(pg), LOCK_BACKEND="postgres")
        server = ServerCpu(pg.pid)
        version = pg.sql("SHOW server_version")[0][0]
        pg.settle()  # lock's first turns on a fresh server wait out holders it may have forgotten
        print(f"== PostgreSQL {version} at {pg.host}:{pg.port}, data in {pg.data_dir}; "
              "every client connects over TCP with a password (SCRAM-SHA-256)")

        tools = {"lock": [a.lock, "-shell=false", "bench/lock", "/bin/true"],
                 "withlock": withlock("bench/withlock", "/bin/true"),
                 "psql-lock": psql_lock("bench/psql-lock", "/bin/true")}
        peers = ("withlock", "psql-lock")
        print(f"\n== Uncontended: one run at a time (/bin/true as the child), {a.reps} rounds of the "
              f"three in turn, the server quiet before each run; load before: {os.getloadavg()[0]:.2f}")
        got = uncontended(tools, env, server, a.reps, 3)
        floor = in_session_ms(env, scratch, withlock_key("bench/floor"), 1000)
        rss = {t: max(peak_rss_mb(argv, env) for _ in range(3)) for t, argv in tools.items()}
        print(f"   {'':10} {'wall ms, median (p10-p90)':>27} {'CPU ms (p10-p90)':>23} "
              f"{'server CPU ms':>14} {'peak RSS':>9}")
        for name, g in got.items():
            w, c = statistics.quantiles(g["wall"], n=10), statistics.quantiles(g["cpu"], n=10)
            print(f"   {name:10} {statistics.median(g['wall']):9.2f} ({w[0]:7.2f}-{w[8]:7.2f})"
                  f" {statistics.median(g['cpu']):8.2f} ({c[0]:6.2f}-{c[8]:6.2f})"
                  f" {g['server'] / a.reps * 1e3:14.2f} {rss[name]:6.1f} MB")
        print(f"   {'floor':10} {floor:9.2f}   (a lock and an unlock on an open session, in psql: the "
              "round trips alone, no process, no connection)")
        print("   CPU: the tool, its child and what they left running (lock's watchdog); server: the "
              "mean of the runs")
        for peer in peers:
            print(f"   lock/{peer}, median per round: wall "
                  f"{median_ratio(got['lock']['wall'], got[peer]['wall']):.2f}x, CPU "
                  f"{median_ratio(got['lock']['cpu'], got[peer]['cpu']):.2f}x; server CPU "
                  f"{ratio(got['lock']['server'], got[peer]['server']):.2f}x (of the sums)")

        k, rounds = a.contenders, a.rounds
        print(f"\n== Handoffs: {k} contenders x {rounds} runs on one name at once, the child "
              f"/bin/true; acquisitions/s, {a.trials} trials in turn, median")
        names = {"lock": [a.lock, "-shell=false", "bench/handoff-lock", "/bin/true"],
                 "withlock": withlock("bench/handoff-withlock", "/bin/true"),
                 "psql-lock": psql_lock("bench/handoff-psql-lock", "/bin/true")}
        harness = burst([["/bin/true"]] * k, env, rounds, server)[2]
        floor_pairs = pairs_script(scratch, withlock_key("bench/handoff-floor"), 10 * rounds)
        rates = {t: [] for t in [*names, "floor"]}
        client = {t: [] for t in names}
        server_ms = {t: [] for t in names}
        for trial in range(a.trials):
            order = list(names)[trial % 3:] + list(names)[:trial % 3]
            for name in order:
                rate, ok, c, s = burst([names[name]] * k, env, rounds, server)
                if not ok:
                    sys.exit(f"{name} failed under contention")
                rates[name].append(rate)
                client[name].append(c - harness)
                server_ms[name].append(s)
            rate, ok, *_ = burst([[PSQL, "-X", "-q", "-o", "/dev/null", "-f", floor_pairs]] * k,
                                 env, 1, server)
            if not ok:
                sys.exit("the floor's psql sessions failed")
            rates["floor"].append(rate * 10 * rounds)
        for name, trials in rates.items():
            print(f"   {name:10} {statistics.median(trials):7.1f}/s  (trials: "
                  f"{', '.join(f'{r:.1f}' for r in trials)})"
                  + (f"   CPU per acquisition: client {statistics.median(client[name]):6.2f} ms, "
                     f"server {statistics.median(server_ms[name]):5.2f} ms" if name in client else
                     f"   ({k} psql sessions, {10 * rounds} lock+unlock each: the server's queue alone)"))
        print("   client CPU: the tool and its child, the harness (a run of /bin/true, measured "
              "alone) taken off")
        for peer in peers:
            print(f"   lock/{peer}, median per trial: {median_ratio(rates['lock'], rates[peer]):.2f}x "
                  f"the acquisitions/s, {median_ratio(client['lock'], client[peer]):.2f}x the client "
                  f"CPU, {median_ratio(server_ms['lock'], server_ms[peer]):.2f}x the server CPU")

        # All three on one name: the child fails (exit 3) if it finds another's still there.
        guard = ["/bin/sh", "-c", 'mkdir "$0" 2>/dev/null || exit 3; rmdir "$0"',
                 os.path.join(scratch, "held")]
        mixed = [[a.lock, "-child-exit-code", "-shell=false", "bench/mixed", *guard],
                 withlock("bench/mixed", *guard), psql_lock("bench/mixed", *guard)]
        contenders = [mixed[i % 3] for i in range(max(k, 3))]
        rate, ok, *_ = burst(contenders, env, rounds, server)
        print(f"\n== One name, the three tools at once: {len(contenders)} contenders (lock, withlock, "
              f"psql-lock in turn) x {rounds} runs, each child checking that no other holds: "
              f"{rate:.1f}/s, " + ("none overlapped, none failed" if ok else "!! a run failed or overlapped"))

        with StatementLog(pg) as log:
            log.read()
            print("\n== Statements of one uncontended run, as the server logged them (log_statement "
                  "= all for the role), and sessions")
            calls = {}
            for name, argv in tools.items():
                server.wait_quiet()
                code = run(argv, env)[1]
                server.wait_quiet()
                if code != 0:
                    sys.exit(f"{name} failed (exit {code})")
                calls[name] = log.read()
                print(f"   {name:10} {calls[name][0]} statements on {calls[name][1]} session(s)")

        def rows(peer):  # a peer's figure of 0 (under a tick of CPU) has no ratio: shown as -
            med = {t: {m: statistics.median(v) for m, v in g.items() if m != "server"} for t, g in got.items()}
            srv = {t: g["server"] / a.reps * 1e3 for t, g in got.items()}
            rate = {t: statistics.median(v) for t, v in rates.items()}
            return [("uncontended wall, ms", med["lock"]["wall"], med[peer]["wall"], floor, 2),
                    ("uncontended CPU, ms", med["lock"]["cpu"], med[peer]["cpu"], None, 2),
                    ("uncontended server CPU, ms", srv["lock"], srv[peer] or None, None, 2),
                    ("handoffs, acquisitions/s", rate["lock"], rate[peer], rate["floor"], 1),
                    ("handoff client CPU, ms", statistics.median(client["lock"]),
                     statistics.median(client[peer]), None, 2),
                    ("handoff server CPU, ms", statistics.median(server_ms["lock"]),
                     statistics.median(server_ms[peer]) or None, None, 2),
                    ("statements per run", calls["lock"][0], calls[peer][0], 2, 0),
                    ("peak RSS, MB", rss["lock"], rss[peer], None, 1)]
        for peer in peers:
            print_summary(f"lock against {peer} (peer) and the floor (a lock and an unlock on open "
                          "sessions); ratios of the medians", rows(peer))
        print(f"\nload after: {os.getloadavg()[0]:.2f}")
        print(f"reproduce: {' '.join(sys.argv)}")


if __name__ == "__main__":
    main()
