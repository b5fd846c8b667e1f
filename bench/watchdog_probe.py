#!/usr/bin/env python3
"""What happens to the child when its `lock` is stopped or killed, tried as a user would.

    bench/watchdog_probe.py                       # build/lock
    bench/watchdog_probe.py --lock old/lock --lock build/lock
    bench/watchdog_probe.py --only local              # the rows whose backend or fault says so

Each row starts a holder whose child ignores SIGTERM and notes the monotonic clock every 50 ms,
and a second contender that waits for the same prefix and notes when its own child starts. Then
the holder's `lock` is stopped (SIGSTOP) for a while, alone or with its child's process group, or
its child leaves a daemon behind (fork, setsid, fork, every descriptor closed) and `lock` is
killed (SIGKILL). Printed per row and binary: when the holder's child (or daemon) last ran, and
when the next holder's child started, in seconds after the fault began, and the overlap. Servers
(etcd, ZooKeeper, the Consul double of tests/consul_double, which keeps a session 2 x TTL as
Consul may) are started here, on loopback, in temporary directories.
"""
import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests", "e2e"), os.path.join(HERE, "..", "tests", "consul_double")]
from etcd_server import EtcdServer  # noqa: E402
from fixture import ConsulDouble  # noqa: E402
from harness import DAEMONIZE  # noqa: E402
from zookeeper_server import ZooKeeperServer, missing as zookeeper_missing  # noqa: E402

HEARTBEAT = ("import os, signal, sys, time\n"
             "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
             "open(sys.argv[2], 'w').write(str(os.getpid()))\n"
             "beats = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)\n"
             "while True:\n"
             "    os.write(beats, b'%.6f\\n' % time.monotonic())\n"
             "    time.sleep(0.05)\n")
STARTED = "import sys, time; open(sys.argv[1], 'w').write('%.6f\\n' % time.monotonic())"


def wait_until(condition, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def last_line(path):
    try:
        with open(path) as f:
            lines = f.read().split()
        return float(lines[-1]) if lines else None
    except FileNotFoundError:
        return None


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def probe(lock, env, flags, fault, seconds, work):
    """One row for one binary: (the holder's last sign of life, the next child's start), in
    seconds after the fault began; None where there was none."""
    beats, nxt, daemon, pid = (os.path.join(work, n) for n in ("beats", "next", "daemon", "pid"))
    for path in (beats, nxt, daemon, pid):
        if os.path.exists(path):
            os.unlink(path)
    prefix = f"probe/{os.path.basename(work)}/{time.monotonic_ns()}"
    if fault == "kill":
        child = ["sh", "-c", f"{DAEMONIZE} {daemon}; exec sleep 1000"]
    else:
        child = [sys.executable, "-c", HEARTBEAT, beats, pid]
    holder = subprocess.Popen([lock, *flags, "-shell=false", prefix, *child], env=env,
                              stderr=subprocess.DEVNULL)
    ready = daemon if fault == "kill" else beats
    if not wait_until(lambda: os.path.exists(ready), 30):
        holder.kill()
        raise RuntimeError(f"{lock}: the holder's child did not start")
    time.sleep(1.0)  # the holder renews a while before the fault: a deliberate length
    waiter = subprocess.Popen([lock, *flags, "-shell=false", prefix, sys.executable, "-c",
                               STARTED, nxt], env=env, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # and the waiter queues
    began = time.monotonic()
    gone = None
    if fault == "kill":
        pid = int(open(daemon).read())
        holder.send_signal(signal.SIGKILL)
        if wait_until(lambda: not alive(pid), seconds):
            gone = time.monotonic() - began
        else:
            os.kill(pid, signal.SIGKILL)
    else:
        stopped = [holder.pid]
        if fault == "stop group":  # the child leads a process group of its own
            stopped.append(-int(open(pid).read()))
        for target in stopped:
            os.kill(target, signal.SIGSTOP)
        time.sleep(seconds)  # the fault's length
        for target in reversed(stopped):
            try:
                os.kill(target, signal.SIGCONT)
            except ProcessLookupError:
                pass
        last = last_line(beats)
        gone = last - began if last is not None else None
    for p in (holder, waiter):
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    started = last_line(nxt)
    if fault != "kill":
        gone = (last_line(beats) or began) - began  # whatever ran after the resume counts too
    return gone, None if started is None else started - began


ROWS = [
    # (backend, what, flags, fault, seconds)
    ("etcd", "lock stopped 13 s (-session-ttl 5s)", ["-session-ttl", "5s", "-kill-after", "1s"],
     "stop", 13),
    ("zookeeper", "lock stopped 12 s (4 s session)", ["-session-ttl", "4s", "-kill-after", "1s"],
     "stop", 12),
    ("etcd", "lock and the child's group stopped 13 s", ["-session-ttl", "5s", "-kill-after", "1s"],
     "stop group", 13),
    ("consul", "lock stopped 18 s (-session-ttl 10s)", ["-session-ttl", "10s", "-kill-after", "1s",
                                                      "-lock-delay", "0s"], "stop", 18),
    ("local", "child daemonizes, lock killed", [], "kill", 15),
    ("etcd", "child daemonizes, lock killed", ["-session-ttl", "5s", "-kill-after", "1s"], "kill", 15),
]


def start_server(backend, base, work, stack):
    """The environment that points lock at a server of `backend`, started here (on `stack`);
    None where it cannot be had."""
    if backend == "local":
        return dict(base, LOCK_STATE_DIR=os.path.join(work, "state"))
    if backend == "etcd":
        return stack.enter_context(EtcdServer()).env(dict(base))
    if backend == "consul":  # it keeps a session 2 x TTL, as Consul may
        consul = stack.enter_context(ConsulDouble(ttl_multiplier=2.0))
        return dict(base, LOCK_BACKEND="consul", CONSUL_HTTP_ADDR=consul.http_addr)
    if zookeeper_missing():
        return None
    zk = stack.enter_context(ZooKeeperServer(tick_time=500))  # grants the 4 s asked for
    return dict(base, LOCK_BACKEND="zookeeper", ZOOKEEPER_ENDPOINTS=zk.connect_string)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lock", action="append", help="a lock binary (repeat to compare)")
    ap.add_argument("--only", default="", help="the rows whose backend or fault contains this")
    args = ap.parse_args()
    locks = [os.path.abspath(p) for p in (args.lock or [os.path.join(HERE, "..", "build", "lock")])]
    rows = [r for r in ROWS if args.only in r[0] + " " + r[1]]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LOCK_", "CONSUL_", "ETCDCTL_"))}
    base["SHELL"] = "/bin/sh"
    print(f"{'backend':10} {'what happened to the holder':42} {'lock':28} {'last ran':>9} "
          f"{'next ran':>9} {'overlap':>8}")
    with tempfile.TemporaryDirectory(prefix="lock-probe-") as work, contextlib.ExitStack() as stack:
        servers = {}
        for backend, what, flags, fault, seconds in rows:
            if backend not in servers:
                servers[backend] = start_server(backend, base, work, stack)
            if servers[backend] is None:
                print(f"{backend:10} {what:42} (left out: {zookeeper_missing()})")
                continue
            for lock in locks:
                gone, started = probe(lock, servers[backend], flags, fault, seconds, work)
                # A daemon still alive when the probe gave up ran at least that long.
                last = f"{gone:.2f}s" if gone is not None else f">{seconds:.0f}s"
                overlap = (gone if gone is not None else seconds) - started if started else 0.0
                overlap = f"{'>' if gone is None and overlap > 0 else ''}{max(0.0, overlap):.2f}s"
                first = f"{started:.2f}s" if started is not None else "-"
                print(f"{backend:10} {what:42} {os.path.relpath(lock):28} {last:>9} {first:>9} "
                      f"{overlap:>8}", flush=True)


if __name__ == "__main__":
    main()
