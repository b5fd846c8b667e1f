"""The examples that ship in packaging/examples/ (and in /usr/share/doc/lock/examples/ of the
package) run as they are written, and README.md and the manual page show them word for word.

systemd does not run here, so the unit's ExecStart is run directly, as systemd would run it, with
the built binary for /usr/bin/lock, a free port for %i, and the environment systemd would give it
(its PATH and the unit's Environment=, nothing of the test's); `systemd-analyze verify` checks the
unit where it is installed. The crontab line's command runs with /bin/sh -c in cron's environment,
with the built binary for /usr/bin/lock and a stand-in for the report job in $HOME/bin. On the local
backend both use the test's private state directory (LOCK_STATE_DIR) instead of the user's
default, the one variable they are given that their unit or crontab does not set."""

import http.client
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
import unittest

from etcd_server import EtcdTestCase
from harness import LOCK, SLOW, LockTestCase, free_port, pid_alive, read_file, tree_children_of, wait_for
from metrics import outcome, promtool_check, read_metrics
from notify_socket import NotifySocket

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EXAMPLES = os.path.join(ROOT, "packaging", "examples")
UNIT = os.path.join(EXAMPLES, "web@.service")
CRONTAB = os.path.join(EXAMPLES, "report.crontab")
FLEET_CRON = os.path.join(EXAMPLES, "report-fleet.cron")
PAIR_UNIT = os.path.join(EXAMPLES, "api@.service")
FOLLOW_UNIT = os.path.join(EXAMPLES, "api-leader.service")
FOLLOW_LEADER = os.path.join(EXAMPLES, "follow-leader")
INSTALLED_LOCK = "/usr/bin/lock"


def read(path):
    with open(path) as f:
        return f.read()


def parse_unit(text):
    """A systemd unit file as {section: {key: [values]}}: comments dropped, lines ending in a
    backslash continued on the next (joined with a space, as systemd does)."""
    sections, section, pending = {}, None, ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line[0] in "#;"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if line.startswith("["):
            section = sections.setdefault(line.strip("[]"), {})
        else:
            key, _, value = line.partition("=")
            section.setdefault(key.strip(), []).append(value.strip())
    return sections


def crontab_jobs(text):
    """The (schedule, command) of each job line of a user's crontab."""
    jobs = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#") or \
                re.match(r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*=", line):
            continue
        fields = line.split(None, 5)
        jobs.append((fields[:5], fields[5]))
    return jobs


def serving(port):
    """True when something answers HTTP on 127.0.0.1:port, False when nothing listens."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/")
        conn.getresponse().read()
        return True
    except ConnectionRefusedError:
        return False
    finally:
        conn.close()


def man_examples(source):
    """The text of every .EX/.EE block of a man page, with roff escapes turned back into text."""
    blocks = re.findall(r"^\.EX\n(.*?)^\.EE$", source, re.M | re.S)
    unescape = [("\\-", "-"), ("\\e", "\\"), ("\\(aq", "'"), ("\\&", ""), ("\\(dq", '"')]
    out = []
    for block in blocks:
        for escaped, plain in unescape:
            block = block.replace(escaped, plain)
        out.append(block)
    return out


def markdown_blocks(source):
    return [m.group(1) for m in re.finditer(r"^```[a-z]*\n(.*?)^```$", source, re.M | re.S)]


class DocumentedTest(unittest.TestCase):
    """README.md and man/lock.1 show each example file exactly."""

    def check_shown(self, path):
        text = read(path)
        self.assertIn(text, markdown_blocks(read(os.path.join(ROOT, "README.md"))),
                      f"README.md does not show {os.path.relpath(path, ROOT)} as it is")
        self.assertIn(text, man_examples(read(os.path.join(ROOT, "man", "lock.1"))),
                      f"man/lock.1 does not show {os.path.relpath(path, ROOT)} as it is")

    def test_unit(self):
        self.check_shown(UNIT)

    def test_crontab(self):
        self.check_shown(CRONTAB)

    def test_fleet_cron(self):
        self.check_shown(FLEET_CRON)

    def test_pair(self):
        for path in (PAIR_UNIT, FOLLOW_UNIT, FOLLOW_LEADER):
            with self.subTest(path=os.path.basename(path)):
                self.check_shown(path)


class SystemdUnitTest(LockTestCase):
    """Three instances of web@.service: exactly two serve at once, and when one's server dies the
    third takes over."""

    def setUp(self):
        super().setUp()
        self.unit = parse_unit(read(UNIT))
        self.service = self.unit["Service"]

    def exec_start(self, instance):
        """The unit's ExecStart for an instance, as systemd would run it here: %i replaced, the
        words split, the built lock for /usr/bin/lock."""
        (line,) = self.service["ExecStart"]
        self.assertNotRegex(line, r"^[-@:+!]", "a special executable prefix the test ignores")
        line = line.replace("%i", str(instance))
        self.assertNotRegex(line.replace("%%", ""), r"%", "a specifier the test does not expand")
        argv = shlex.split(line.replace("%%", "%"))
        self.assertEqual(argv[0], INSTALLED_LOCK)
        return argv[1:]

    def start(self, port):
        """An instance, with a notification socket of its own as Type=notify gives it."""
        log = open(self.path(f"web@{port}.log"), "a")
        self.addCleanup(log.close)
        sock = NotifySocket(self, abstract=True)
        # The unit's environment, and the test's state directory for the user's default one,
        # which the plain and the sanitized runs of this test would otherwise share.
        settings = dict(setting.split("=", 1) for setting in self.service.get("Environment", []))
        env = service_env(settings, NOTIFY_SOCKET=sock.address, LOCK_STATE_DIR=self.state)
        proc = self.start_lock(*self.exec_start(port), stdout=log, stderr=subprocess.STDOUT, env=env)
        proc.notify = sock
        return proc

    def assert_notified(self, instance, status):
        """The instance told systemd it started (READY=1), and its latest status starts with
        `status`."""
        sock = instance.notify
        sock.wait_for_message(lambda d: d.get("READY") == "1", what="READY=1")

        def latest():
            said = [d.get("STATUS") for d in sock.datagrams() if d.get("STATUS")]
            return said and said[-1].startswith(status)
        sock.wait_until(latest, 5.0, f"a status starting {status!r}")

    def status(self):
        r = self.run_lock("-status", "-json", "service/web")
        self.assertIn(r.returncode, (0, 3), r.stderr)
        s = json.loads(r.stdout)
        return sorted(h["pid"] for h in s["holders"]), sorted(w["pid"] for w in s["waiters"])

    def wait_status(self, holders, waiters, what):
        want = (sorted(p.pid for p in holders), sorted(p.pid for p in waiters))
        wait_for(lambda: self.status() == want, what=what)

    def assert_serving(self, ports, up):
        """Exactly the instances in `up` answer on their ports (those that hold wait until their
        server is listening)."""
        for port in up:
            wait_for(lambda: serving(port), what=f"the server on port {port}")
        for port in set(ports) - set(up):
            self.assertFalse(serving(port), f"port {port} serves, but its instance should wait")

    def start_three(self):
        """Three instances on ports of their own, started in turn: the first two serve, the
        third waits. Returns the ports and the instances."""
        ports = [free_port() for _ in range(3)]
        a = self.start(ports[0])
        self.wait_status([a], [], "the first instance to hold")
        b = self.start(ports[1])
        self.wait_status([a, b], [], "the second instance to hold")
        c = self.start(ports[2])
        self.wait_status([a, b], [c], "the third instance to wait")
        self.assert_serving(ports, ports[:2])
        return ports, (a, b, c)

    def test_two_of_three_serve_and_the_third_takes_over(self):
        self.assertEqual(self.service.get("KillMode"), ["mixed"])
        self.assertEqual(self.service.get("Restart"), ["always"])
        success = self.service.get("SuccessExitStatus", [""])[0].split()
        ports, (a, b, c) = self.start_three()
        self.assertFalse([p for p in tree_children_of(c.pid) if b"http.server" in read_cmdline(p)])
        # Type=notify with -ready=wait: all three count as started; the status tells the ones
        # that serve from the standby, and whom it waits behind.
        self.assertEqual(self.service.get("Type"), ["notify"])
        for instance in (a, b):
            self.assert_notified(instance, "holding one of 2 slots of service/web, token ")
        self.assert_notified(c, "waiting for one of 2 slots of service/web (2 of 2 held: ")
        said = [d.get("STATUS") for d in c.notify.datagrams() if d.get("STATUS")][-1]
        for holder in (a, b):
            self.assertIn(f"pid {holder.pid} on ", said)

        # The first server dies: its lock exits with the server's status (128+9), which systemd
        # would see, and the waiting instance's server starts.
        os.kill(server_of(a), signal.SIGKILL)
        code, _, _ = self.finish(a)
        self.assertEqual(code, 128 + signal.SIGKILL)
        self.wait_status([b, c], [], "the third instance to take over")
        self.assert_serving(ports, ports[1:])

        # Restart=always starts the first instance again: now it is the one that waits.
        a = self.start(ports[0])
        self.wait_status([b, c], [a], "the restarted instance to wait")
        self.assert_serving(ports, ports[1:])

        # systemctl stop with KillMode=mixed: SIGTERM to lock alone. A holder passes it on and
        # exits with its server's status, which SuccessExitStatus counts as success; the waiting
        # one gives up with status 1.
        for p in (a, b, c):
            p.send_signal(signal.SIGTERM)
        codes = [self.finish(p)[0] for p in (a, b, c)]
        self.assertEqual(codes[0], 1)
        self.assertEqual(codes[1:], [128 + signal.SIGTERM] * 2)
        self.assertIn(str(128 + signal.SIGTERM), success)
        self.assertEqual(self.prefixes_left(), [])

    def test_a_server_that_hangs_gives_its_slot_to_the_standby(self):
        """-check: the first instance's server stops answering (SIGSTOP: hung, not dead). Its
        checks fail, -check-failures in a row; its lock stops the server, releases the slot and
        exits with -lost-exit-code (1: Restart=always starts it again, as a standby), and the
        standby's server starts only once the hung one is gone."""
        argv = self.exec_start(0)
        check = argv[argv.index("-check") + 1]
        self.assertTrue(shutil.which(shlex.split(check)[0]), f"{check}: not installed")
        interval = float(argv[argv.index("-check-interval") + 1].rstrip("s"))
        self.assertNotIn("-check-failures", argv)
        failures = 3  # the default
        ports, (a, b, c) = self.start_three()

        hung = server_of(a)
        os.kill(hung, signal.SIGSTOP)
        stopped = time.monotonic()

        server_of(c, interval * (failures + 1) + 30)
        took = time.monotonic() - stopped
        self.assertFalse(pid_alive(hung), "the hung server still ran beside the standby's")
        # The first failing check starts within an interval of the hang, and the last one ends
        # when curl gives up (-m 4); the stop then takes the server's SIGTERM.
        self.assertLess(took, interval * failures + interval + 4 + 3 * SLOW)
        code, _, _ = self.finish(a)
        self.assertEqual(code, 1)
        self.assertRegex(read_file(self.path(f"web@{ports[0]}.log")),
                         r"lock: gave up the lock: the health check failed 3 times in a row \(the "
                         r"last exited with status 28\); the child was stopped\n")
        said = [d.get("STATUS") for d in a.notify.datagrams() if d.get("STATUS")]
        self.assertTrue(any(s.startswith("stopping the child: giving up the lock: the health check "
                                         "failed 3 times in a row") for s in said), said)
        self.wait_status([b, c], [], "the standby to hold")
        self.assert_serving(ports, ports[1:])
        for p in (b, c):
            p.send_signal(signal.SIGTERM)
            self.assertEqual(self.finish(p)[0], 128 + signal.SIGTERM)
        self.assertEqual(self.prefixes_left(), [])

    def test_systemd_analyze_verify(self):
        # verify checks that the command exists: point it at the built binary.
        verify_unit(self, read(UNIT).replace(INSTALLED_LOCK, os.path.abspath(LOCK)), f"web@{free_port()}.service")


def server_of(instance, timeout=10.0):
    """The pid of the server an instance's lock runs (its one child running python), once it
    runs."""
    def find():
        servers = [p for p in tree_children_of(instance.pid) if b"http.server" in read_cmdline(p)]
        return servers[0] if servers else None
    return wait_for(find, timeout, "the server to start")


def verify_unit(case, text, name):
    """systemd-analyze verify of a unit's `text`, installed as `name` in a scratch directory;
    the commands it names must exist."""
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        case.skipTest("systemd-analyze is not installed")
    units = case.path("units")
    os.makedirs(units, exist_ok=True)
    with open(os.path.join(units, re.sub(r"@[^.]+\.", "@.", name)), "w") as f:
        f.write(text)
    r = subprocess.run([analyze, "verify", os.path.join(units, name)], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    case.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""), name)


def read_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


# The stand-in for the user's report job: says when it starts and ends, and runs until told to.
REPORT = """#!/bin/sh
echo "started $$" >> "$HOME/runs"
while [ ! -e "$HOME/finish" ]; do sleep 0.01; done
echo "ended $$" >> "$HOME/runs"
"""


class CrontabTest(LockTestCase):
    """The crontab line's command, started again while the previous run still goes, skips its
    run: it gives up after its -timeout with status 1 and says why in the log."""

    def setUp(self):
        super().setUp()
        (self.schedule, command), = crontab_jobs(read(CRONTAB))
        self.assertNotIn("%", command, "cron would turn % into a newline")
        self.assertTrue(command.startswith(INSTALLED_LOCK + " "), command)
        self.command = os.path.abspath(LOCK) + command[len(INSTALLED_LOCK):]
        self.home = self.path("home")
        os.makedirs(os.path.join(self.home, "bin"))
        report = os.path.join(self.home, "bin", "report")
        with open(report, "w") as f:
            f.write(REPORT)
        os.chmod(report, 0o755)
        # What cron gives a job, plus the test's state directory (and the sanitizers' options).
        self.cron_env = {"HOME": self.home, "LOGNAME": "root", "SHELL": "/bin/sh",
                         "PATH": "/usr/bin:/bin", "LOCK_STATE_DIR": self.state}
        if "ASAN_OPTIONS" in self.env:
            self.cron_env["ASAN_OPTIONS"] = self.env["ASAN_OPTIONS"]

    def cron_run(self):
        p = subprocess.Popen(["/bin/sh", "-c", self.command], env=self.cron_env, cwd=self.home,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def runs(self):
        return read_file(os.path.join(self.home, "runs")).split()[::2]

    def log(self):
        return read_file(os.path.join(self.home, "report.log"))

    def test_an_overlapping_run_is_skipped(self):
        self.assertEqual(len(self.schedule), 5)
        timeout = float(re.search(r"-timeout[= ](\d+)s\b", self.command).group(1))
        conflict = int(re.search(r"-conflict-exit-code[= ](\d+)\b", self.command).group(1))

        first = self.cron_run()
        wait_for(lambda: self.runs() == ["started"], what="the first report to start")

        started = time.monotonic()
        second = self.cron_run()
        out, err = second.communicate(timeout=30 * SLOW)
        elapsed = time.monotonic() - started
        self.assertEqual((second.returncode, out, err), (conflict, "", ""))
        self.assertGreaterEqual(elapsed, timeout)
        self.assertLess(elapsed, timeout + 5 * SLOW)
        self.assertEqual(self.runs(), ["started"], "the second run started a report")
        self.assertRegex(self.log(), r"^lock: timed out waiting for prefix 'cron/report'; "
                                     r"held by pid \d+ ")

        with open(os.path.join(self.home, "finish"), "w"):
            pass
        out, err = first.communicate(timeout=30 * SLOW)
        self.assertEqual((first.returncode, out, err), (0, "", ""))
        self.assertEqual(self.runs(), ["started", "ended"])

        # The next run, with nothing left over, does its work.
        later = self.cron_run()
        out, err = later.communicate(timeout=30 * SLOW)
        self.assertEqual((later.returncode, out, err), (0, "", ""))
        self.assertEqual(self.runs(), ["started", "ended"] * 2)
        self.assertEqual(len(self.log().splitlines()), 1, self.log())
        self.assertEqual(self.prefixes_left(), [])


class FleetCronTest(EtcdTestCase):
    """The cron.d line for a fleet, run by two hosts (two runs, each with its own metrics
    directory) on one etcd, the second a second late: the first runs the report, the second finds
    the lock still held for -min-hold and skips with the conflict code; each host's metrics file
    says so, and node_exporter could serve it as it is."""

    def setUp(self):
        super().setUp()
        lines = [line for line in read(FLEET_CRON).splitlines() if line and not line.startswith("#")]
        variables = dict(line.split("=", 1) for line in lines if re.match(r"^[A-Z_]+=", line))
        self.assertEqual(list(variables), ["ETCDCTL_ENDPOINTS"])
        (job,) = [line for line in lines if not re.match(r"^[A-Z_]+=", line)]
        fields = job.split(None, 6)
        self.assertEqual((len(fields[:5]), fields[5]), (5, "report"))  # schedule and user
        self.argv = shlex.split(fields[6])
        self.assertEqual(self.argv[0], INSTALLED_LOCK)
        self.argv[0] = os.path.abspath(LOCK)
        self.argv[-1] = self.path("report")  # the job: a stand-in that logs its run
        with open(self.argv[-1], "w") as f:
            f.write(f"#!/bin/sh\necho ran >> {self.path('runs')}\n")
        os.chmod(self.argv[-1], 0o755)
        self.metrics_at = self.argv.index("-metrics-file") + 1
        self.assertEqual(os.path.dirname(self.argv[self.metrics_at]), "/var/lib/prometheus/node-exporter")
        self.cron_env = {"HOME": self.tmp, "LOGNAME": "report", "SHELL": "/bin/sh", "PATH": "/usr/bin:/bin",
                         "ETCDCTL_ENDPOINTS": self.etcd.url}
        if "ASAN_OPTIONS" in self.env:
            self.cron_env["ASAN_OPTIONS"] = self.env["ASAN_OPTIONS"]

    def host(self, name, try_for=None):
        """Runs the job as host `name` would: its own node_exporter directory; `try_for`
        replaces the line's -try."""
        os.mkdir(self.path(name))
        argv = list(self.argv)
        if try_for:
            argv[argv.index("-try") + 1] = try_for
        argv[self.metrics_at] = os.path.join(self.path(name), os.path.basename(argv[self.metrics_at]))
        p = subprocess.Popen(argv, env=self.cron_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p, argv[self.metrics_at]

    def test_one_host_of_two_runs_the_report(self):
        conflict = int(self.argv[self.argv.index("-conflict-exit-code") + 1])
        # The line's 1 s is for the fleet's late hosts; the first host, alone, only has to get in,
        # which a sanitized build on a busy machine may not do within 1 s.
        first, first_metrics = self.host("web1", try_for=f"{SLOW:g}s")
        wait_for(lambda: os.path.exists(self.path("runs")) or first.poll() is not None,
                 what="the first host's report")
        if first.poll() is not None:
            self.fail(f"the first host did not run the report: {self.finish(first)}")
        late, late_metrics = self.host("web2")
        code, out, err = self.finish(late, 30)
        self.assertEqual(code, conflict, err)
        self.assertRegex(err, r"^lock: timed out waiting for prefix 'cron/report'")
        self.assertEqual(read_file(self.path("runs")), "ran\n")
        self.assertIsNone(first.poll(), "the first host gave the lock up before -min-hold")
        first.send_signal(signal.SIGTERM)  # a stopping signal ends the extra hold
        self.assertEqual(self.finish(first, 30), (0, "", ""))
        for path, expected in ((first_metrics, "ran"), (late_metrics, "conflict")):
            self.assertEqual(promtool_check(path), "")
            self.assertEqual(outcome(read_metrics(path, "cron/report", "etcd")), expected)
        self.assertGreater(read_metrics(first_metrics, "cron/report", "etcd")["lock_last_success_timestamp_seconds"], 0)


# What systemd gives a service besides its unit's Environment= (systemd.exec(5)), and nothing of
# the test's own: an example must work with its unit's environment alone.
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def service_env(settings, path=SYSTEMD_PATH, **extra):
    """A service's environment: systemd's PATH (or `path`), the unit's settings and `extra`; the
    sanitizers' options too, which belong to the build under test rather than to the unit."""
    env = {"PATH": path, **settings, **extra}
    if "ASAN_OPTIONS" in os.environ:
        env["ASAN_OPTIONS"] = os.environ["ASAN_OPTIONS"]
    return env


def exec_argv(unit, **specifiers):
    """A unit's one ExecStart as systemd would split it, with the specifiers given (i="8080")
    expanded, and its Environment= settings, as (argv, {name: value})."""
    service = parse_unit(read(unit))["Service"]
    (line,) = service["ExecStart"]
    for name, value in specifiers.items():
        line = line.replace("%" + name, value)
    assert not re.search(r"%[^%]", line.replace("%%", "")), f"a specifier left in {line}"
    env = dict(setting.split("=", 1) for setting in service.get("Environment", []))
    return shlex.split(line.replace("%%", "%")), env


@unittest.skipUnless(shutil.which("jq"), "jq is not installed")
class SystemdPairTest(EtcdTestCase):
    """api@.service on two hosts (two instances here, each with its own host name for %H) and
    api-leader.service beside them: the file that follow-leader keeps always names the instance
    that serves, from the moment one does, through a failover, to none."""

    def setUp(self):
        super().setUp()
        # The server the pair runs: a stand-in that serves HTTP on 127.0.0.1 at the given port.
        self.server = self.path("api-server")
        with open(self.server, "w") as f:
            f.write('#!/bin/sh\nexec python3 -m http.server --bind 127.0.0.1 "$1"\n')
        os.chmod(self.server, 0o755)
        # systemd's PATH finds lock in /usr/bin; here, the built one.
        self.bin = self.path("bin")
        os.mkdir(self.bin)
        os.symlink(os.path.abspath(LOCK), os.path.join(self.bin, "lock"))
        self.leader_file = self.path("api-leader")

    def unit_env(self, settings):
        self.assertIn("ETCDCTL_ENDPOINTS", settings)
        # Pointed at the test's etcd; systemd's PATH finds the built lock first.
        return service_env(dict(settings, ETCDCTL_ENDPOINTS=self.etcd.url),
                           path=f"{self.bin}:{SYSTEMD_PATH}")

    def instance(self, host):
        port = str(free_port())
        argv, settings = exec_argv(PAIR_UNIT, i=port, H=host)
        self.assertEqual((argv[0], argv[-2]), (INSTALLED_LOCK, "/usr/local/bin/api-server"))
        argv[0], argv[-2] = os.path.abspath(LOCK), self.server
        p = subprocess.Popen(argv, env=self.unit_env(settings), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p, f"http://{host}:{port}", int(port)

    def follower(self):
        argv, settings = exec_argv(FOLLOW_UNIT)
        self.assertEqual(argv, ["/usr/local/bin/follow-leader", "service/api", "/run/api-leader"])
        # In a process group of its own, ended whole as systemd ends the unit's cgroup.
        p = subprocess.Popen([FOLLOW_LEADER, argv[1], self.leader_file], env=self.unit_env(settings),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        self.procs.append(p)
        return p

    def wait_leader(self, value, what, timeout=20):
        wait_for(lambda: read_file(self.leader_file) == value + "\n", timeout * SLOW, what)
        self.assertEqual([f for f in os.listdir(self.tmp) if f.startswith("api-leader")], ["api-leader"])

    def test_the_leaders_address_follows_the_pair(self):
        follower = self.follower()
        self.wait_leader("", "the file to say that none serves")
        a, a_value, a_port = self.instance("host-a")
        self.wait_leader(a_value, "the first instance's address")
        wait_for(lambda: serving(a_port), what="the first instance to serve")
        b, b_value, b_port = self.instance("host-b")
        wait_for(lambda: len(self.etcd.keys("service/api/")) == 2, what="the second instance to wait")
        self.assertEqual(read_file(self.leader_file), a_value + "\n")
        # The serving instance fails: the standby takes over, and the file follows.
        os.kill(server_of(a), signal.SIGKILL)
        self.assertEqual(self.finish(a)[0], 128 + signal.SIGKILL)
        self.wait_leader(b_value, "the standby's address")
        wait_for(lambda: serving(b_port), what="the standby to serve")
        b.send_signal(signal.SIGTERM)  # systemctl stop, KillMode=mixed
        self.assertEqual(self.finish(b)[0], 128 + signal.SIGTERM)
        self.wait_leader("", "the file to say that none serves again")
        self.assertIsNone(follower.poll())
        os.killpg(follower.pid, signal.SIGTERM)
        self.assertEqual(self.finish(follower)[2], "")

    def test_a_leader_that_hangs_hands_over_to_the_standby(self):
        """-check on the pair: the serving instance's server stops answering (SIGSTOP). After 3
        failed checks its lock stops it, exits 1 (for Restart=) and lets go; the standby serves,
        its server started only once the hung one is gone, and the leader file follows."""
        follower = self.follower()
        a, a_value, a_port = self.instance("host-a")
        self.wait_leader(a_value, "the first instance's address")
        wait_for(lambda: serving(a_port), what="the first instance to serve")
        b, b_value, b_port = self.instance("host-b")
        wait_for(lambda: len(self.etcd.keys("service/api/")) == 2, what="the second instance to wait")
        hung = server_of(a)
        os.kill(hung, signal.SIGSTOP)
        stopped = time.monotonic()
        self.wait_leader(b_value, "the standby's address", timeout=5 * 3 + 5 + 4 + 20)
        took = time.monotonic() - stopped
        wait_for(lambda: serving(b_port), 20, "the standby to serve")
        self.assertFalse(pid_alive(hung), "the hung server still ran beside the standby's")
        # Three checks 5 s apart, the first within 5 s of the hang, the last ending when curl gives
        # up (-m 4).
        self.assertLess(took, 5 * 3 + 5 + 4 + 3 * SLOW)
        code, _, err = self.finish(a)
        self.assertEqual(code, 1, err)
        self.assertIn("lock: gave up the lock: the health check failed 3 times in a row", err)
        b.send_signal(signal.SIGTERM)
        self.assertEqual(self.finish(b)[0], 128 + signal.SIGTERM)
        self.wait_leader("", "the file to say that none serves")
        os.killpg(follower.pid, signal.SIGTERM)
        self.finish(follower)

    def test_a_file_planted_beside_the_leader_file_is_not_written_through(self):
        # Anyone who may write where the file is kept could plant a link at a name the script
        # writes to first; the holder's -value must not be written into its target.
        victim = self.path("victim")
        with open(victim, "w") as f:
            f.write("kept\n")
        for name in ("api-leader.tmp", "api-leader"):
            os.symlink(victim, self.path(name))
        follower = self.follower()
        a, a_value, _ = self.instance("host-a")
        wait_for(lambda: read_file(self.leader_file) == a_value + "\n", 20 * SLOW, "the leader's address")
        self.assertFalse(os.path.islink(self.leader_file), "the leader file is still the planted link")
        self.assertEqual(read_file(victim), "kept\n")
        self.assertEqual(os.stat(self.leader_file).st_mode & 0o777, 0o644)
        a.send_signal(signal.SIGTERM)
        self.finish(a)
        os.killpg(follower.pid, signal.SIGTERM)
        self.finish(follower)

    def test_systemd_analyze_verify(self):
        # verify checks that the commands exist: point them at ones that do.
        for unit, name in ((PAIR_UNIT, f"api@{free_port()}.service"), (FOLLOW_UNIT, "api-leader.service")):
            verify_unit(self, read(unit).replace(INSTALLED_LOCK, os.path.abspath(LOCK))
                        .replace("/usr/local/bin/api-server", self.server)
                        .replace("/usr/local/bin/follow-leader", FOLLOW_LEADER), name)


if __name__ == "__main__":
    unittest.main()
