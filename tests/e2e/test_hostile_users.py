"""Two users share a state directory, and one of them is hostile: B puts every kind of thing
another user can make in place of every file of the local backend's, at every step of A's run.
Each run of A's ends within the bounds README promises, says in one line why when it cannot go
on, never overlaps another, deletes nothing of B's, and never writes through B's links."""

import grp
import json
import os
import pwd
import re
import select
import shutil
import signal
import stat
import subprocess
import time
import types
import unittest

from harness import SLOW, max_overlap, read_file
from test_hostile import HostileCase, raw_controls, wait_until

PLANTER = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_planter.py")).read()
# The test's own interpreter may live where other users cannot read it.
B_PYTHON = "/usr/bin/python3"

# Every kind of thing another user can make (no device: that takes root), "private" being a file
# A cannot open; and every file of the local backend's: the prefix's directory ("p"), the files in
# it (the first ticket A takes is number 1), and the fencing counter.
KINDS = ("fifo", "socket", "symlink", "directory", "sparse", "garbage", "private")
TARGETS = ("p", "meta", "q.00000000000000000000", "q.00000000000000000001",
           "h.00000000000000000001", "slot.0", "@fence")
# The steps of A's run at which B acts (TwoUsersTest's methods of those names).
STEPS = ("before_acquiring", "while_waiting", "while_holding", "as_it_lets_go")
KIND_NAMES = {stat.S_IFIFO: "FIFO", stat.S_IFSOCK: "socket", stat.S_IFLNK: "symbolic link",
              stat.S_IFDIR: "directory", stat.S_IFREG: "file"}


def account_tool(*command):
    """Runs useradd, userdel, groupadd or groupdel. Another build's run of this file may hold the
    lock of /etc/passwd for a moment: a refusal for that is tried again, for up to 30 s."""
    deadline = time.monotonic() + 30
    while True:
        r = subprocess.run(command, capture_output=True, text=True)
        if r.returncode == 0 or time.monotonic() > deadline or "lock" not in r.stderr:
            return r
        time.sleep(0.1)


class TwoUsersTest(HostileCase):
    """User A runs lock in a state directory that user B made for both (a common group, mode
    2770, so that neither's entries are shielded by a sticky bit and only lock's own care keeps
    B's), and B puts every kind of thing in place of every file of the local backend's: before A
    acquires, while A waits, while A holds, and as A lets go. Each run of A's ends within its
    bounds, says in one line why when it cannot go on, never overlaps another, and deletes
    nothing of B's; and lock never writes through B's links."""

    @classmethod
    def setUpClass(cls):
        tools = ("useradd", "userdel", "groupadd", "groupdel", "setpriv")
        missing = [t for t in tools if not shutil.which(t)]
        if os.geteuid() != 0 or missing or not os.access(B_PYTHON, os.X_OK):
            raise unittest.SkipTest(
                f"needs root, {', '.join(tools)} and {B_PYTHON} to make two users "
                f"(euid {os.geteuid()}, missing: {', '.join(missing) or 'nothing'})")
        base = f"lkhostile{os.getpid()}"
        cls.group_name, cls.names, cls.made = base, [base + "a", base + "b"], []
        try:
            r = account_tool("groupadd", "--system", cls.group_name)
            if r.returncode != 0:
                raise RuntimeError(f"groupadd {cls.group_name}: {r.stderr.strip()}")
            cls.made.append(("groupdel", cls.group_name))
            for name in cls.names:
                r = account_tool("useradd", "--system", "--no-create-home",
                                 "--shell", "/usr/sbin/nologin", name)
                if r.returncode != 0:
                    raise RuntimeError(f"useradd {name}: {r.stderr.strip()}")
                cls.made.insert(0, ("userdel", name))
        except BaseException:
            cls.tearDownClass()
            raise
        cls.user_a, cls.user_b = map(pwd.getpwnam, cls.names)
        cls.gid = grp.getgrnam(cls.group_name).gr_gid

    @classmethod
    def tearDownClass(cls):
        failed = []
        for tool, name in cls.made:
            r = account_tool(tool, name)
            if r.returncode != 0:
                failed.append(f"{tool} {name}: {r.stderr.strip()}")
        cls.made = []
        if failed:
            raise RuntimeError("; ".join(failed))

    def as_user(self, user):
        """Runs the rest as `user`, in the common group too."""
        return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                f"--groups={self.gid}", "--"]

    def setUp(self):
        super().setUp()
        os.chmod(self.tmp, 0o755)
        # A's own: where its children log, and what a link of B's may lead lock to.
        self.out = self.path("a")
        self.precious = os.path.join(self.out, "precious")
        self.decoy = os.path.join(self.out, "decoy")
        os.mkdir(self.out, 0o700)
        os.mkdir(self.decoy, 0o700)
        with open(self.precious, "w") as f:
            f.write("A's own\n")
        for path in (self.out, self.decoy, self.precious):
            os.chown(path, self.user_a.pw_uid, self.user_a.pw_gid)
        self.shared = self.path("shared")
        os.mkdir(self.shared)
        os.chmod(self.shared, 0o1777)
        self.env = {k: v for k, v in self.env.items() if k != "LOCK_STATE_DIR"}
        self.env["HOME"] = self.out
        self.planter = subprocess.Popen(self.as_user(self.user_b) + [B_PYTHON, "-c", PLANTER],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env={"PATH": "/usr/bin:/bin"}, cwd="/")
        self.procs.append(self.planter)

    def tearDown(self):
        if self.planter.poll() is None:
            self.planter.stdin.close()
            try:
                self.planter.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.planter.kill()
                self.planter.wait()
        self.planter.stdout.close()
        super().tearDown()

    def ask_b(self, **request):
        self.planter.stdin.write(json.dumps(request) + "\n")
        self.planter.stdin.flush()
        if not select.select([self.planter.stdout], [], [], 10 * SLOW)[0]:
            self.fail(f"B did not answer {request}")
        return json.loads(self.planter.stdout.readline())

    # ---- A's runs, and what is checked of each --------------------------------------------------

    def start_a(self, case, *args):
        return self.start_lock("-state-dir", case.state, *args, env=self.env,
                               wrapper=self.as_user(self.user_a))

    def finish_a(self, case, proc, what, bound):
        """Waits at most `bound` seconds (times SLOW) for a run of A's, and notes how it ended
        unless it was 0 with nothing said, or 1 with one line of lock's. Returns its status."""
        try:
            _, err = proc.communicate(timeout=bound * SLOW)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            case.problems.append(f"{what} still ran after {bound * SLOW:.1f}s: {err!r}")
            return None
        code = proc.returncode
        if "lock lost" in err:
            case.lost = True
        if code == 0 and err == "":
            return code
        if (code == 1 and re.fullmatch(r"lock: [^\n]+\n", err) and not raw_controls(err.encode())
                and "bad_alloc" not in err):
            case.said.append(err.strip())
            return code
        case.problems.append(f"{what} ended with {code}: {err!r}")
        return code

    def child(self, case, name, gates=()):
        """A child that logs its section, and stays in it until each of `gates` exists (touching
        <gate>.at first); SIGTERM ends its section too. Its stderr goes nowhere: what the shell
        says of a killed sleep is not lock's to say."""
        log = case.log
        waits = "".join(f"touch {case.tag}.{gate}.at; "
                        f"while [ ! -e {case.tag}.{gate} ]; do sleep 0.01; done; " for gate in gates)
        return (f"exec 2>/dev/null; cd {self.out}; "
                f"trap 'echo \"exit {name}\" >> {log}; exit 0' TERM; "
                f"echo \"enter {name}\" >> {log}; {waits}echo \"exit {name}\" >> {log}")

    def at(self, case, gate, proc):
        """Whether the child came to `gate` (False when its lock ended first)."""
        mark = os.path.join(self.out, f"{case.tag}.{gate}.at")
        return wait_until(lambda: os.path.exists(mark) or proc.poll() is not None, 10) \
            and os.path.exists(mark)

    def open_gate(self, case, gate):
        with open(os.path.join(self.out, f"{case.tag}.{gate}"), "w"):
            pass

    def plant(self, case, kind, target):
        place = case.state if target in ("@fence", "p") else os.path.join(case.state, "p")
        path = os.path.join(place, target)
        # A link leads to what A can write to, should lock follow it.
        reply = self.ask_b(op="plant", path=path, kind=kind,
                           target=self.decoy if target == "p" else self.precious)
        if reply["ok"]:
            case.planted[path] = reply["made"]
        else:
            case.notes.append(f"B could not put a {kind} at {target}: {reply['error']}")

    def once(self, case, what):
        """A run of A's with no other run of A's about."""
        proc = self.start_a(case, "-timeout", "2s", "p", self.child(case, what))
        self.finish_a(case, proc, what, 2 + 3)

    def status(self, case):
        proc = self.start_a(case, "-status", "p")
        try:
            _, err = proc.communicate(timeout=5 * SLOW)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            case.problems.append(f"-status still ran after {5 * SLOW:.1f}s")
            return
        if proc.returncode not in (0, 3) and not (
                proc.returncode == 1 and re.fullmatch(r"lock: [^\n]+\n", err)):
            case.problems.append(f"-status ended with {proc.returncode}: {err!r}")
        if raw_controls(err.encode()):
            case.problems.append(f"-status let control characters through: {err!r}")

    def hold_a(self, case, name, gates):
        proc = self.start_a(case, "p", self.child(case, name, gates))
        if not self.at(case, gates[0], proc):
            case.problems.append(f"the {name} never held")
        return proc

    # ---- the steps of A's run at which B acts ---------------------------------------------------

    def before_acquiring(self, case, kind, target):
        self.plant(case, kind, target)
        self.once(case, "first")

    def while_waiting(self, case, kind, target):
        holder = self.hold_a(case, "holder", ["go"])
        waiter = self.start_a(case, "-timeout", "10s", "p", self.child(case, "waiter"))
        ticket = os.path.join(case.state, "p", "q.00000000000000000001")
        if not wait_until(lambda: os.path.isfile(ticket) or waiter.poll() is not None, 10):
            case.problems.append("the waiter never queued")
        # A second waiter, with no -timeout: only a stopping signal ends its wait.
        stopped = self.start_a(case, "p", self.child(case, "stopped"))
        wait_until(lambda: os.path.isfile(ticket[:-1] + "2") or stopped.poll() is not None, 10)
        self.plant(case, kind, target)
        os.kill(stopped.pid, signal.SIGTERM)
        if self.finish_a(case, stopped, "a waiter given SIGTERM", 2) not in (1, None):
            case.problems.append("a waiter given SIGTERM ran its child")
        self.open_gate(case, "go")
        self.finish_a(case, holder, "the holder", 5)
        self.finish_a(case, waiter, "the waiter", 10 + 3)

    def while_holding(self, case, kind, target):
        holder = self.hold_a(case, "holder", ["go"])
        self.plant(case, kind, target)
        self.open_gate(case, "go")
        self.finish_a(case, holder, "the holder", 5)

    def as_it_lets_go(self, case, kind, target):
        # The child's last act is to let B act: lock releases right after.
        holder = self.hold_a(case, "holder", ["go", "planted"])
        self.open_gate(case, "go")
        if not self.at(case, "planted", holder):
            case.problems.append("the holder's child never came to its end")
        self.plant(case, kind, target)
        self.open_gate(case, "planted")
        self.finish_a(case, holder, "the holder", 5)

    def pairs(self, step):
        """Every kind of thing in place of every file; under the sanitizers, which look for memory
        errors rather than for the one combination that hangs, every kind and every file once per
        step (a different pairing in each step)."""
        if SLOW == 1:
            return [(kind, target) for kind in KINDS for target in TARGETS]
        shift = STEPS.index(step)
        return [(kind, TARGETS[(i + shift) % len(TARGETS)]) for i, kind in enumerate(KINDS)]

    def check_step(self, step):
        for kind, target in self.pairs(step):
            with self.subTest(kind=kind, target=target):
                case = types.SimpleNamespace(tag=f"{step}-{kind}-{target}", problems=[],
                                             notes=[], said=[], planted={}, lost=False)
                case.state = os.path.join(self.shared, case.tag)
                case.log = os.path.join(self.out, case.tag + ".log")
                # B makes the state directory; the prefix's too when B is to put things in
                # it, since one of A's making is closed to B (0700).
                made_by_b = [case.state]
                if target not in ("p", "@fence"):
                    made_by_b.append(os.path.join(case.state, "p"))
                for path in made_by_b:
                    reply = self.ask_b(op="mkdir", path=path, mode=0o2770, group=self.gid)
                    self.assertTrue(reply["ok"], reply)
                    case.planted[path] = reply["made"]
                getattr(self, step)(case, kind, target)
                # And whoever comes next, and looks.
                self.once(case, "next")
                self.status(case)
                self.assert_case(case)

    def assert_case(self, case):
        problems = list(case.problems)
        # A hold lost to B's replacing its file may overlap the next, as README says, until the
        # loss is noticed.
        if not case.lost:
            try:
                if max_overlap(case.log) > 1:
                    problems.append(f"two children overlapped: {read_file(case.log)!r}")
            except (KeyError, ValueError):
                problems.append(f"the children's log is malformed: {read_file(case.log)!r}")
        for path, (ino, kind) in case.planted.items():
            try:
                st = os.lstat(path)
                there = (st.st_ino, stat.S_IFMT(st.st_mode))
            except FileNotFoundError:
                there = None
            if there != (ino, kind):
                place = os.path.dirname(path)
                moved = [name for name in (os.listdir(place) if os.path.isdir(place) else [])
                         if os.lstat(os.path.join(place, name)).st_ino == ino]
                problems.append(f"B's {KIND_NAMES[kind]} at {os.path.basename(path)} was "
                                + (f"moved to {moved[0]}" if moved else "removed"))
        if read_file(self.precious) != "A's own\n" or os.listdir(self.decoy):
            problems.append("lock wrote through B's link to A's own files")
        self.assertEqual(problems, [], f"lock said: {case.said}; {case.notes}")

    def test_before_acquiring(self):
        self.check_step("before_acquiring")

    def test_while_waiting(self):
        self.check_step("while_waiting")

    def test_while_holding(self):
        self.check_step("while_holding")

    def test_as_it_lets_go(self):
        self.check_step("as_it_lets_go")

    def test_strangers_among_the_tickets_hold_up_no_one(self):
        """B's files where tickets go, which A may not open or wait on (a private one under a
        ticket's name, one whose name is an escape sequence, a FIFO), are no waiters of A's: A's
        runs go through as if they were not there, queue behind one another as before, and say
        nothing, B's name least of all."""
        case = types.SimpleNamespace(tag="strangers", problems=[], notes=[], said=[], planted={},
                                     lost=False)
        case.state = os.path.join(self.shared, case.tag)
        case.log = os.path.join(self.out, case.tag + ".log")
        for path in (case.state, os.path.join(case.state, "p")):
            reply = self.ask_b(op="mkdir", path=path, mode=0o2770, group=self.gid)
            self.assertTrue(reply["ok"], reply)
            case.planted[path] = reply["made"]
        for kind, target in (("private", "q.00000000000000000000"),
                             ("private", "h.00000000000000000000"),
                             ("private", "q.0\x1b]0;PWNED\x07\x1b[2J"),
                             ("fifo", "q.00000000000000000005")):
            self.plant(case, kind, target)
        self.assertEqual(case.notes, [])
        self.once(case, "first")
        holder = self.hold_a(case, "holder", ["go"])
        waiter = self.start_a(case, "-timeout", "10s", "p", self.child(case, "waiter"))
        prefix = os.path.join(case.state, "p")

        def queued():
            return any(name.startswith("q.") and os.lstat(os.path.join(prefix, name)).st_uid
                       == self.user_a.pw_uid for name in os.listdir(prefix))
        if not wait_until(lambda: queued() or waiter.poll() is not None, 10):
            case.problems.append("the waiter never queued")
        self.open_gate(case, "go")
        self.finish_a(case, holder, "the holder", 5)
        self.finish_a(case, waiter, "the waiter", 10 + 3)
        self.status(case)
        self.assertEqual(case.said, [], "a stranger's file stopped a run")
        self.assertIn("enter waiter", read_file(case.log))
        self.assert_case(case)


if __name__ == "__main__":
    unittest.main()
