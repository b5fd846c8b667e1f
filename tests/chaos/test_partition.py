"""Real network partitions: a 3-member etcd cluster and a 3-server ZooKeeper ensemble, each member
in a network namespace of its own, and every `lock` in a namespace of its own too (netns.py,
partition_cluster.py). A victim `lock` holds the prefix through one member (a single endpoint, so
that which member it talks to is known, and checked with ss); three contenders queue behind it,
each with the members of the majority side as endpoints; then links are cut:

  member  the member the victim is connected to (a follower) is cut off from everyone;
  leader  the leader is cut off; the victim's member stays with the majority;
  holder  the victim's own namespace is cut off;
  link    only the path between the victim's member (a follower) and the leader is cut: the
          victim still reaches its member, and its member the third one.

In every case: no instant with two children between their start and end lines (the chaos
harness's section log and checker: contenders.py, checker.py), fencing tokens rise, and a
contender on the majority side takes over while the cut lasts. Where nothing the victim sends can
reach the leader's side any more (member, holder, link), its last renewal was confirmed before the
cut at the latest, so its child must be dead by cut + TTL - TTL/10, its lease-safe deadline at the
latest. When the leader is cut off, the victim may ride the election out (it is then ended with
SIGTERM a TTL after the election, so that the next holder takes over while the cut lasts) or lose
its hold; either way safety holds. After the cut is undone, the cluster settles and a later run, from the victim's
namespace through the same member, acquires.

Every run uses -session-ttl 5s -kill-after 1s (ZooKeeper ticks every 500 ms, so it grants the 5 s
asked for). One cluster serves all of a backend's cases, healed and settled between them: a
ZooKeeper ensemble's JVMs take seconds to start. Skipped, saying why, without root, ip, or the
right to make namespaces, or without the servers. PARTITION_WORKDIR keeps the logs.
"""

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "e2e")]

import netns  # noqa: E402
from checker import Row, check  # noqa: E402
from contenders import LogWatcher  # noqa: E402
from etcd_server import ETCD  # noqa: E402
from harness import LOCK, SLOW  # noqa: E402
from partition_cluster import (EtcdCluster, NsContenders, ZooKeeperCluster,  # noqa: E402
                               die_with_us, wait_until)
from zookeeper_server import JAVA, SERVER_CLASSPATH  # noqa: E402

TTL = "5s"
KILL_AFTER = "1s"
SETTLE = 1.0  # how long the victim holds, renewing, before the cut: a deliberate length
CONTENDERS = ("c0", "c1", "c2")
LONG = 120.0  # a victim's section that only a stop can end
CRASH_WORDS = ("what()", "terminate called", "Sanitizer", "Segmentation")

# Faults of lock that these cases show, known and reported: (backend, case) -> (the checker's
# kinds of failure they cause, why). Such a case still runs every check; the kinds listed are
# printed as "xfail" instead of failing it, any other kind fails it, and a clean run prints
# "XPASS": the entry can go.
KNOWN = {
    ("zookeeper", "link"): (
        {"overlaps", "overruns"},
        "lock renews a ZooKeeper session with a lookup of its node, which a follower answers by "
        "itself: a follower cut off from the leader, but not from lock, goes on answering for "
        "syncLimit x tickTime (2.5 s here), so lock's last confirmed renewal comes after the "
        "last touch of the session the leader heard of, and the leader expires it (and hands "
        "the lock on) before lock's lease-safe deadline"),
}


def _terminated(signum, frame):
    # unittest lets KeyboardInterrupt through every test and fixture, so that the with-blocks
    # and the atexit backstop below stop the servers and delete the namespaces; a second
    # SIGTERM must not cut that short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def setUpModule():
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)


def clean_env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("CONSUL_", "ETCDCTL_", "LOCK_", "ZOOKEEPER_"))}


def rotate(items, k):
    k %= len(items)
    return items[k:] + items[:k]


def tail(path, lines=5):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).strip()
    except OSError:
        return ""


def established_peers(node, port):
    """The addresses this namespace has established TCP connections to, on `port`."""
    r = node.run("ss", "-Htn", "state", "established")
    peers = set()
    for line in r.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3].rsplit(":", 1)[-1] == str(port):
            peers.add(fields[3].rsplit(":", 1)[0])
    return peers


def reap(proc, timeout):
    """The exit status of a run of lock, or None if it did not end in time (it is killed then:
    its watchdog takes the child tree down with it)."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait()
        return None


class _Partitions:
    """The four cases, for a cluster class (EtcdCluster or ZooKeeperCluster)."""
    cluster_class = None
    label = None

    @classmethod
    def missing(cls):
        return None

    @classmethod
    def setUpClass(cls):
        why = netns.unavailable() or cls.missing()
        if why:
            raise unittest.SkipTest(why)
        cls.keep = "PARTITION_WORKDIR" in os.environ
        cls.workdir = os.environ.get("PARTITION_WORKDIR") or netns.scratch_dir(cls.label)
        os.makedirs(cls.workdir, exist_ok=True)
        cls.timings = []
        cls.stack = contextlib.ExitStack()
        # Should unittest itself be interrupted (^C, SIGTERM), tearDownClass never runs; the
        # stack closes at exit instead (closing twice does nothing).
        atexit.register(cls.stack.close)
        if not cls.keep:
            cls.stack.callback(shutil.rmtree, cls.workdir, True)
        began = time.monotonic()
        try:
            cls.net = cls.stack.enter_context(netns.Network(cls.label))
            cls.clients = {name: cls.net.add(name, 21 + i)
                           for i, name in enumerate(("h", *CONTENDERS))}
            cls.cluster = cls.stack.enter_context(cls.cluster_class(cls.net))
        except BaseException:
            cls.stack.close()
            raise
        print(f"\n{cls.label}: 3 members up in namespaces on {cls.net.subnet} in "
              f"{time.monotonic() - began:.1f}s"
              + (f"; deleted what runs that died left: {cls.net.swept}" if cls.net.swept else ""),
              file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.stack.close()
        for line in cls.timings:
            print(line, file=sys.stderr)
        left = cls.net.leftovers()
        if left:
            raise AssertionError(f"left behind: {left}")

    def test_member_of_holder_cut_off(self):
        self.run_case("member")

    def test_leader_cut_off(self):
        self.run_case("leader")

    def test_holder_cut_off(self):
        self.run_case("holder")

    def test_holders_member_cut_from_leader(self):
        self.run_case("link")

    # ---- one case -------------------------------------------------------------------------

    def plan(self, kind, leader):
        """(the member the victim talks to, the cut, the members the contenders talk to)."""
        c, net, holder = self.cluster, self.net, self.clients["h"]
        followers = [m for m in c.members if m is not leader]
        if kind == "member":
            return followers[0], lambda: net.cut(followers[0].node), [leader, followers[1]]
        if kind == "leader":
            return followers[0], lambda: net.cut(leader.node), followers
        if kind == "holder":
            return leader, lambda: net.cut(holder), list(c.members)
        assert kind == "link"
        return (followers[0], lambda: net.cut_between(followers[0].node, leader.node),
                [leader, followers[1]])

    def run_case(self, kind):
        c, net, holder = self.cluster, self.net, self.clients["h"]
        leader = c.wait_settled()
        home, cut, majority = self.plan(kind, leader)
        # Only the leader's side can keep the victim's lease, and after these cuts nothing the
        # victim sends reaches it: its last renewal was confirmed before the cut, at the latest.
        # A cut leader leaves the victim a way to a new one: it may ride the election out.
        deadline_known = kind != "leader"
        common = ["-session-ttl", TTL, "-kill-after", KILL_AFTER, "-shell=false"]
        prefix = f"partition/{kind}-{uuid.uuid4().hex[:8]}"
        log = os.path.join(self.workdir, f"{c.name}-{kind}.log")
        flags_by_tag = {t: c.flags(rotate(majority, i)) + common + ["-timeout", "60s"]
                        for i, t in enumerate(CONTENDERS)}
        victim_flags = c.flags([home]) + common
        where = {t: self.clients[t] for t in CONTENDERS}
        where["victim"] = where["after"] = holder
        env = clean_env()
        watcher = LogWatcher(log)
        watcher.start()
        crowd = NsContenders(LOCK, flags_by_tag["c0"], prefix, log, env, len(CONTENDERS),
                             seed=len(kind), think=0.3, where=where, flags_by_tag=flags_by_tag)
        err_path = os.path.join(self.workdir, f"{c.name}-{kind}.victim.err")
        after_path = os.path.join(self.workdir, f"{c.name}-{kind}.after.err")
        victim = after = None
        t = {}  # instants on the monotonic clock
        rode_out = None
        try:
            t["spawned"] = time.monotonic()
            with open(err_path, "w") as err:
                victim = subprocess.Popen(
                    crowd.command(LONG, "victim", victim_flags + ["-verbose"], t["spawned"]),
                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                    preexec_fn=die_with_us)
            v = watcher.wait(lambda ss: next((s for s in ss if s.tag == "victim"), None)
                             or victim.poll() is not None, 30 * SLOW)
            if not v or v is True:
                self.fail(f"the victim did not acquire: exit {victim.poll()}: {tail(err_path)}")
            crowd.start()
            self.wait_queue(c, majority, prefix, len(CONTENDERS))
            peers = established_peers(holder, c.client_port)
            self.assertEqual(peers, {home.node.ip}, "the victim should talk to its one endpoint")
            ttl = c.granted_ttl(v, home)
            self.assertEqual(ttl, 5.0, "the TTL granted to the victim's lease or session")
            time.sleep(SETTLE)
            self.assertIsNone(v.end, f"the victim's child ended before the cut: {v}")

            t["cut"] = cut()
            new_leader = None
            if kind == "leader":
                new_leader = wait_until(lambda: c.leader_of(majority), 30 * SLOW, 0.1)
                self.assertTrue(new_leader, "the majority elected no leader")
                t["elected"] = time.monotonic()
                # A window of one TTL after the election, a deliberate length: a victim whose
                # renewals did not get through to the new leader has begun its stop by then.
                watcher.wait(lambda ss: v.end is not None, ttl)
                rode_out = v.end is None
                if rode_out:
                    # It rode the election out; SIGTERM ends its hold so that the next takes over
                    # while the cut lasts.
                    t["released"] = time.monotonic()
                    victim.send_signal(signal.SIGTERM)
            bound = (ttl + 15) * SLOW
            if not watcher.wait(lambda ss: v.end is not None, bound):
                self.fail(f"the victim's child still ran {bound:.0f}s after the cut: {v}; "
                          f"lock said {tail(err_path)!r}")
            nxt = watcher.wait(lambda ss: next(
                (s for s in ss if s.tag in CONTENDERS and s.start > v.start), None),
                (2 * ttl + 30) * SLOW)
            self.assertTrue(nxt, f"no contender took over while the cut lasted: {crowd.snapshot()}")
            code = reap(victim, 15 * SLOW)
            t["heal"] = net.heal()
            settled = c.wait_settled()
            t["settled"] = time.monotonic()

            # A later run, from the victim's namespace through the same member, acquires: once
            # that member accepts connections from there again (a namespace that was cut off
            # keeps its failed ARP entry a while, and lock counts a server it cannot reach at
            # start as an error, not as a wait).
            self.assertTrue(wait_until(lambda: holder.can_connect(home.node.ip, c.client_port),
                                       20 * SLOW, 0.2),
                            f"{home.name} unreachable from the victim's namespace after the heal")
            t["after"] = time.monotonic()
            with open(after_path, "w") as err:
                after = subprocess.Popen(
                    crowd.command(0.2, "after", victim_flags + ["-timeout", "30s", "-verbose"],
                                  t["after"]),
                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                    preexec_fn=die_with_us)
            reap(after, 45 * SLOW)
            after_section = watcher.section_of("after")
        finally:
            with contextlib.suppress(netns.IpError):
                net.heal()
            ending_at = time.monotonic()
            hung = crowd.stop(15 * SLOW)
            for proc in (victim, after):
                if proc is not None and proc.poll() is None:
                    reap(proc, 0)
            watcher.wait(lambda ss: not watcher.open_sections(), 10 * SLOW)
            watcher.stop()

        deadline = t["cut"] + ttl - ttl / 10
        row = check(Row(c.name, kind, 1), watcher.sections,
                    deadlines={v.pid: deadline} if deadline_known else {},
                    expect={v.pid: "stop" if deadline_known else None}, ending_at=ending_at,
                    losses_allowed=True)
        for line in watcher.malformed:
            row.problems.append(f"malformed log line {line!r}")
        stopped = [s for s in watcher.sections
                   if s.tag in CONTENDERS and s.how not in ("done", None) and s.end < ending_at]

        rel = lambda x: f"{x - t['cut']:+.2f}s"  # noqa: E731
        found = {k for k, n in (("overlaps", row.overlaps + row.unresolved),
                                ("stale_tokens", row.stale_tokens), ("overruns", row.overruns),
                                ("problems", len(row.problems))) if n}
        known_kinds, why = KNOWN.get((c.name, kind), (set(), None))
        verdict = ("FAIL" if found - known_kinds else "xfail" if found else
                   "XPASS" if why else "ok")
        line = (f"{c.name:9} {kind:6} {verdict:5}: victim on {home.name} (leader {leader.name}); "
                f"child {v.how} at {rel(v.end)} "
                + (f"(deadline {rel(deadline)}, margin {deadline - v.end:+.2f}s)" if deadline_known
                   else f"(new leader {new_leader.name} at {rel(t['elected'])}; "
                   + (f"rode the election out, SIGTERM at {rel(t['released'])})" if rode_out
                      else "lost its hold)"))
                + f", lock exit {code}; next holder at {rel(nxt.start)} (token {v.token} -> "
                f"{nxt.token}); healed at {rel(t['heal'])}, settled in "
                f"{t['settled'] - t['heal']:.2f}s (leader {settled.name}); later run: exit "
                f"{after.returncode}, held "
                + (f"{after_section.start - t['after']:.2f}s after its start" if after_section
                   else "never")
                + f"; {row.sections} sections, {row.overlaps} overlaps, {len(stopped)} "
                f"contender children stopped, {len(crowd.failures)} of {crowd.runs} contender "
                f"runs failed"
                + (f" (e.g. {crowd.failures[0][2].splitlines()[-1][:200]!r})"
                   if crowd.failures and crowd.failures[0][2] else ""))
        type(self).timings.append(line)
        print("\n" + line, file=sys.stderr)

        detail = f"\n{line}\nexamples: {row.examples}\nlock said: {tail(err_path, 8)}"
        self.assertFalse(found - known_kinds, f"{sorted(found)}: {row.problems}" + detail)
        self.assertEqual(hung, [], "locks that did not exit on SIGTERM" + detail)
        if deadline_known:
            self.assertEqual(v.how, "stopped", detail)
            self.assertEqual(code, 1, "a lost hold exits 1" + detail)
        else:
            self.assertIn(code, (0, 1), detail)
        with open(err_path, errors="replace") as f:
            errors = f.read()
        self.assertFalse([w for w in CRASH_WORDS if w in errors], errors[-2000:])
        self.assertEqual(after.returncode, 0, f"no later run acquired: {tail(after_path)!r}")
        self.assertIsNotNone(after_section, "the later run's child did not run")
        self.assertGreater(after_section.start, t["heal"])
        if verdict == "xfail":
            print(f"{c.name} / {kind}: known fault of lock: {why}\n  e.g. {row.examples[:1]}",
                  file=sys.stderr)
        elif verdict == "XPASS":
            print(f"{c.name} / {kind}: the known fault did not show; KNOWN's entry can go",
                  file=sys.stderr)

    def wait_queue(self, c, members, prefix, count):
        """Waits until `count` waiters queue behind the victim (lock -status, from a contender's
        namespace, through the majority side)."""
        node = self.clients[CONTENDERS[0]]
        last = {}

        def queued():
            r = node.run(LOCK, *c.flags(members), "-status", "-json", prefix, timeout=10 * SLOW)
            last["out"] = (r.returncode, r.stdout[-500:], r.stderr[-500:])
            try:
                return len(json.loads(r.stdout).get("waiters", [])) >= count
            except ValueError:
                return False
        if not wait_until(queued, 20 * SLOW, 0.1):
            self.fail(f"the contenders did not queue behind the victim: {last.get('out')}")


class EtcdPartitionTest(_Partitions, unittest.TestCase):
    cluster_class = EtcdCluster
    label = "etcd"

    @classmethod
    def missing(cls):
        return None if os.access(ETCD, os.X_OK) else f"needs etcd ({ETCD})"


class ZooKeeperPartitionTest(_Partitions, unittest.TestCase):
    cluster_class = ZooKeeperCluster
    label = "zk"

    @classmethod
    def missing(cls):
        lacking = [p for p in (JAVA, *SERVER_CLASSPATH) if not os.path.exists(p)]
        return f"needs {', '.join(lacking)}" if lacking else None


if __name__ == "__main__":
    unittest.main()
