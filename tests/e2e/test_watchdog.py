"""The watchdog keeps the child within its lease when lock cannot: a holder's lock stopped for
longer than its TTL on etcd, ZooKeeper and Consul (alone, or with the child's process group), and
a daemon the child left behind when lock is killed with SIGKILL. Each proof is against a second
holder, which takes the prefix over as soon as the server lets it go."""

import os
import re
import signal
import sys
import time
import unittest

from etcd_server import EtcdTestCase
from harness import DAEMONIZE, SLOW, LockTestCase, pid_alive, proc_stat, read_file, wait_for
from zookeeper_server import ZooKeeperServer, missing as zookeeper_missing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "consul_double"))
from fixture import ConsulDouble  # noqa: E402

# The holder's child: ignores SIGTERM, so that only SIGKILL ends it, and appends the monotonic
# clock to a file every 50 ms, so that when it last ran can be compared with the pause. Its pid
# and process group go to a file of their own first.
HEARTBEAT = """\
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
beats = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {os.getpgrp()}\\n")
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
while True:
    os.write(beats, b"%.6f\\n" % time.monotonic())
    time.sleep(0.05)
"""

# The next holder's child: when it started, and the state the first child was in at that moment
# ("gone", "Z" for a zombie, or a live state: an overlap).
NEXT = """\
import os, sys, time
now = time.monotonic()
try:
    with open(f"/proc/{sys.argv[2]}/stat") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
except OSError:
    state = "gone"
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{now:.6f} {state}\\n")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
"""

LEASE_RAN_OUT = re.compile(r"^lock: lock lost: the lease ran out [^\n]* while lock did not run "
                           r"\(stopped, paused, starved, or the machine asleep\); the child was "
                           r"stopped\n$")


def all_stopped(pid):
    """True once every thread of the process is stopped (a SIGSTOP has taken effect)."""
    try:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return False
    return bool(states) and all(s == "T" for s in states)


def heartbeats(path):
    return [float(line) for line in read_file(path).splitlines() if line.strip()]


def signal_quietly(send, target, sig):
    try:
        send(target, sig)
    except ProcessLookupError:
        pass


class WatchdogCase:
    """Mixed into a backend's test case, which sets TTL (seconds) and FLAGS (both holders' flags,
    -session-ttl TTL among them). A stopped lock is continued before anything is killed, so that
    it can still clean up what it can."""

    TTL = None
    FLAGS = ()

    def setUp(self):
        super().setUp()
        self.prefix = self.id().rsplit(".", 1)[1]

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                signal_quietly(os.kill, p.pid, signal.SIGCONT)
        super().tearDown()

    def pause_beyond_ttl(self, stop_group=False):
        """Stops the holder's lock (and with `stop_group`, the child's process group) until the
        next holder's child has started, then continues it. The child must have been killed no
        later than the lease-safe deadline, TTL less a tenth after the pause began at the latest,
        and so before the next child started; the resumed lock says that the lease ran out while
        it did not run, and exits 1."""
        beats_path, child_path, next_path = (self.path(n) for n in ("beats", "child", "next"))
        holder = self.start_lock(*self.FLAGS, "-shell=false", self.prefix,
                                 sys.executable, "-c", HEARTBEAT, beats_path, child_path)
        child, group = map(int, self.wait_file("child", "\n").split())
        self.kill_later(child)
        wait_for(lambda: heartbeats(beats_path) or holder.poll() is not None,
                 what="the holder's child to beat")
        if holder.poll() is not None:
            self.fail(f"the holder ended early: {self.finish(holder)}")
        if stop_group:
            self.assertEqual(group, child, "the child does not lead a process group of its own")

        nxt = self.start_lock(*self.FLAGS, "-timeout", "60s", "-shell=false", self.prefix,
                              sys.executable, "-c", NEXT, next_path, str(child))

        os.kill(holder.pid, signal.SIGSTOP)
        paused = time.monotonic()
        if stop_group:
            os.killpg(group, signal.SIGSTOP)
            wait_for(lambda: all_stopped(child), 2, "the child to stop")
        wait_for(lambda: all_stopped(holder.pid), 2, "lock to stop")
        # The fault lasts until the server has let the prefix go and the next holder has it.
        started, state = self.wait_file("next", "\n", timeout=self.TTL + 10).split()
        started = float(started)

        resumed = time.monotonic()
        os.kill(holder.pid, signal.SIGCONT)
        if stop_group:
            signal_quietly(os.killpg, group, signal.SIGCONT)
        code, out, err = self.finish(holder)
        next_code, next_out, next_err = self.finish(nxt)

        beats = heartbeats(beats_path)
        last = max(beats)
        dead_by = paused + self.TTL * 0.9
        self.assertLess(last, dead_by, f"the child ran {last - paused:.3f}s into the pause, past "
                                       f"the lease-safe deadline ({self.TTL * 0.9:.1f}s at most)")
        self.assertLess(last, started, f"overlap: the child ran {last - started:.3f}s after the "
                                       f"next holder's child started")
        self.assertIn(state, ("gone", "Z"), "overlap: the child was alive when the next holder's "
                                            "child started")
        self.assertLess(last, resumed, "the child ran again once lock was continued")
        self.assertFalse(pid_alive(child), "the child outlived its lock")
        self.assertEqual((code, out), (1, ""), err)
        self.assertRegex(err, LEASE_RAN_OUT)
        self.assertEqual((next_code, next_out, next_err), (0, "", ""))


class EtcdWatchdogTest(WatchdogCase, EtcdTestCase):
    TTL = 5
    FLAGS = ("-session-ttl", "5s", "-kill-after", "1s")

    def test_lock_stopped_beyond_its_ttl(self):
        self.pause_beyond_ttl()

    def test_lock_and_the_childs_group_stopped_beyond_its_ttl(self):
        # A stopped child cannot act on SIGTERM; SIGKILL at the deadline ends it all the same.
        self.pause_beyond_ttl(stop_group=True)

    def test_a_daemon_the_child_left_dies_with_a_killed_lock(self):
        # The daemon left the child's process group (setsid) and holds none of lock's descriptors:
        # only the watchdog, the tree's subreaper, can still find it once lock is gone.
        daemon_path, child_path = self.path("daemon"), self.path("child")
        child_command = f"{DAEMONIZE} {daemon_path}; echo $$ > {child_path}; exec sleep 1000"
        holder = self.start_lock(*self.FLAGS, self.prefix, child_command)
        daemon = int(self.wait_file("daemon", "\n"))
        self.kill_later(daemon)
        child = int(self.wait_file("child", "\n"))
        self.kill_later(child)
        self.assertNotEqual(proc_stat(daemon)[2], proc_stat(child)[2], "the daemon is still in "
                                                                       "the child's process group")
        nxt = self.start_lock(*self.FLAGS, "-timeout", "60s", self.prefix, f"if kill -0 {daemon} "
                              "2>/dev/null; then echo alive; else echo dead; fi")

        os.kill(holder.pid, signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: not pid_alive(daemon), 1.0, "the daemon to die")
        self.assertLess(time.monotonic() - killed, 1.0 * SLOW)
        self.assertEqual(self.finish(nxt, timeout=self.TTL + 10), (0, "dead\n", ""))
        self.assertEqual(self.finish(holder)[0], -signal.SIGKILL)


@unittest.skipIf(zookeeper_missing(), zookeeper_missing())
class ZooKeeperWatchdogTest(WatchdogCase, LockTestCase):
    # Ticks of 500 ms: the server grants 1 s to 10 s, so the 4 s asked for is granted.
    TTL = 4
    FLAGS = ("-session-ttl", "4s", "-kill-after", "1s")

    @classmethod
    def setUpClass(cls):
        cls.zk = ZooKeeperServer(tick_time=500).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.zk.__exit__(None, None, None)

    def setUp(self):
        super().setUp()
        self.env.update(LOCK_BACKEND="zookeeper", ZOOKEEPER_ENDPOINTS=self.zk.connect_string)

    def test_lock_stopped_beyond_its_timeout(self):
        self.pause_beyond_ttl()


class ConsulWatchdogTest(WatchdogCase, LockTestCase):
    # The double lets the lease go TTL after its last renewal, not the 2×TTL a real server may
    # take: the next holder can take over as early as the lease allows. No lock-delay, so that
    # nothing but the lease keeps it waiting.
    TTL = 10
    FLAGS = ("-session-ttl", "10s", "-kill-after", "1s", "-lock-delay", "0s")

    @classmethod
    def setUpClass(cls):
        cls.consul = ConsulDouble(ttl_multiplier=1.0).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.consul.__exit__(None, None, None)

    def setUp(self):
        super().setUp()
        for var in [v for v in self.env if v.startswith("CONSUL_")]:
            del self.env[var]
        self.env["CONSUL_HTTP_ADDR"] = self.consul.http_addr

    def test_lock_stopped_beyond_its_ttl(self):
        self.pause_beyond_ttl()


if __name__ == "__main__":
    unittest.main()
