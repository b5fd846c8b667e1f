"""Supervision of the child tree: signals to lock reach the child, every process the child started
stops with it, and the lock is never handed on while any of them still runs."""

import errno
import os
import pwd
import shutil
import signal
import subprocess
import time
import unittest

from harness import (DAEMONIZE, LOCK, SLOW, LockTestCase, all_children_of, children_of,
                     group_members, pid_alive, proc_stat, read_file, send, wait_for, watchdogs_of,
                     watchdogs_with)

STOP_SIGNALS = [signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM]
PASSED_SIGNALS = [signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH, signal.SIGALRM]

# The sleeps get the group's signals too; the shell's report of them ("Terminated") is not ours.
LOOP = "while :; do sleep 0.05; done 2>/dev/null"

# Runs lock with an empty file system over /proc, seen by lock alone (its own mount namespace).
HIDE_PROC = ["unshare", "--mount", "sh", "-c", 'mount -t tmpfs none /proc && exec "$@"', "sh"]


def name(sig):
    return signal.Signals(sig).name


def default_signals():
    """lock starts as from an interactive shell even when these tests run in the background of a
    script, which ignores SIGINT and SIGQUIT for its jobs: a shell cannot trap a signal that was
    ignored when it started, so the child would not see them."""
    for sig in STOP_SIGNALS + PASSED_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def signal_mask(pid, field):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith(field + ":")).split()[1], 16)


def short(sig):
    """The name `trap` and `kill` use: TERM for SIGTERM."""
    return name(sig)[3:]


class SignalTestCase(LockTestCase):

    def start(self, *args, **kwargs):
        # The scratch directory as working directory keeps any core dump out of the source tree.
        return self.start_lock(*args, cwd=self.tmp, preexec_fn=default_signals, **kwargs)

    def hiding_proc(self):
        """The wrapper that hides /proc from lock; the test skips in the ASan build."""
        if "asan" in os.path.basename(LOCK):
            self.skipTest("the sanitizers' leak check needs /proc itself; the plain build runs this")
        return HIDE_PROC

    def skip_if_proc_not_hidden(self, err):
        if err.startswith(("unshare:", "mount:")):
            self.skipTest(f"cannot hide /proc here: {err.strip()}")

    def pid_from(self, file):
        return int(self.wait_file(file, "\n").strip())

    def assert_released(self, prefix="p"):
        r = self.run_lock("-timeout", "2s", "-shell=false", prefix, "echo", "next")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "next\n", ""))
        self.assertEqual(self.prefix_files(prefix), [])


class ForwardingTest(SignalTestCase):

    def test_stop_signals_are_forwarded_and_end_the_run(self):
        for sig in STOP_SIGNALS:
            with self.subTest(signal=name(sig)):
                got, ready = self.path(f"got-{name(sig)}"), self.path(f"ready-{name(sig)}")
                traps = "; ".join(f"trap 'echo {short(s)} > {got}; exit 0' {short(s)}"
                                  for s in STOP_SIGNALS)
                p = self.start("p", f"{traps}; echo $$ > {ready}; {LOOP}")
                self.pid_from(f"ready-{name(sig)}")
                send(p, sig)
                rc, out, err = self.finish(p)
                self.assertEqual((rc, err), (0, ""))
                self.assertEqual(read_file(got), short(sig) + "\n")
                self.assert_released()

    def test_a_child_that_ignores_sigterm_is_killed_after_kill_after(self):
        kill_after = 1.0
        p = self.start("-kill-after", "1s", "-preserve-status", "p",
                       f"trap '' TERM; echo $$ > {self.path('pid')}; {LOOP}")
        child = self.pid_from("pid")
        start = time.monotonic()
        send(p, signal.SIGTERM)
        wait_for(lambda: not pid_alive(child), kill_after + 5, "the child to die")
        died = time.monotonic() - start
        self.assertGreaterEqual(died, kill_after, "SIGKILL came before -kill-after")
        self.assertLessEqual(died, kill_after + 2 * SLOW, "SIGKILL came late")
        self.assertEqual(self.finish(p)[0], 128 + signal.SIGKILL)
        self.assert_released()

    def test_sigterm_stops_every_process_of_a_dash_child(self):
        # dash starts both sleeps itself and passes SIGTERM to neither: only a signal to the whole
        # group stops them. The long -kill-after shows SIGTERM did it, not the SIGKILL.
        p = self.start("-kill-after", "60s", "p", f"echo $$ > {self.path('pid')}; "
                                                  "sleep 1000 & sleep 1000")
        group = self.pid_from("pid")
        sleeps = wait_for(lambda: (lambda m: m if len(m) >= 2 else None)(
            [pid for pid in group_members(group) if read_file(f"/proc/{pid}/comm") == "sleep\n"]),
            what="both sleeps")
        send(p, signal.SIGTERM)
        wait_for(lambda: not any(map(pid_alive, [group, *sleeps])), 10, "the tree to stop")
        self.assertEqual(self.finish(p, timeout=10)[0], 0)
        self.assertEqual(group_members(group), [])
        self.assert_released()

    def test_other_signals_are_forwarded_without_stopping_the_child(self):
        log, stop = self.path("log"), self.path("stop")
        traps = "; ".join(f"trap 'echo {short(s)} >> {log}' {short(s)}" for s in PASSED_SIGNALS)
        p = self.start("p", f"{traps}; echo $$ > {self.path('pid')}; "
                            f"while [ ! -e {stop} ]; do sleep 0.05; done 2>/dev/null; "
                            "echo finished")
        child = self.pid_from("pid")
        expected = ""
        for sig in PASSED_SIGNALS:
            send(p, sig)
            expected += short(sig) + "\n"
            self.wait_file("log", expected)
            self.assert_running(p)
            self.assertTrue(pid_alive(child))
        open(stop, "w").close()
        self.assertEqual(self.finish(p), (0, "finished\n", ""))
        self.assertEqual(read_file(log), expected)


class WaitingTest(SignalTestCase):

    def test_stop_signal_while_waiting_ends_the_wait(self):
        go = self.path("go")
        holder = self.start("p", f"echo held > {self.path('held')}; "
                                 f"while [ ! -e {go} ]; do sleep 0.02; done")
        self.wait_file("held")
        for sig in STOP_SIGNALS:
            with self.subTest(signal=name(sig)):
                marker = self.path(f"ran-{name(sig)}")
                waiter = self.start("p", "touch", marker)
                wait_for(lambda: self.ticket_of(waiter.pid), what="the waiter's ticket")
                start = time.monotonic()
                send(waiter, sig)
                rc, out, err = self.finish(waiter)
                self.assertLess(time.monotonic() - start, 2 * SLOW)
                self.assertEqual((rc, out, err), (1, "", f"lock: interrupted by {name(sig)} "
                                                         "while waiting for the lock\n"))
                self.assertEqual(self.tickets(), [])
                self.assertFalse(os.path.exists(marker))
        self.assert_running(holder)
        open(go, "w").close()
        self.assertEqual(self.finish(holder)[0], 0)
        self.assertEqual(self.prefix_files("p"), [])


class LeftoversTest(SignalTestCase):

    def test_lock_ends_once_the_background_processes_are_gone(self):
        p = self.start("-kill-after", "60s", "p", f"sleep 1000 & echo $! > {self.path('bg')}")
        rc, out, err = self.finish(p, timeout=10)
        self.assertEqual((rc, out, err), (0, "", ""))
        self.assertFalse(pid_alive(int(read_file(self.path("bg")))))
        self.assert_released()

    def test_lock_is_held_until_the_last_leftover_ends(self):
        # It ignores SIGTERM from the start, so it outlives the child until the test kills it.
        p = self.start("-kill-after", "60s", "p",
                       "trap '' TERM; "
                       f"sh -c 'echo $$ > {self.path('bg')}; while :; do sleep 0.05; done' &")
        leftover = self.pid_from("bg")
        self.kill_later(leftover)
        r = self.run_lock("-timeout", "300ms", "p", "touch", self.path("ran"))
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.startswith("lock: timed out waiting for prefix 'p'"), r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_running(p)
        os.kill(leftover, signal.SIGKILL)
        self.assertEqual(self.finish(p), (0, "", ""))
        self.assert_released()


class InheritedDispositionTest(SignalTestCase):

    def test_an_ignored_sigchld_from_the_parent_does_not_stop_lock_from_reaping(self):
        # With SIGCHLD ignored the kernel would reap our children behind our back.
        def ignore_sigchld():
            default_signals()
            signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        proc = self.start_lock("p", "echo ran", cwd=self.tmp, preexec_fn=ignore_sigchld)
        self.assertEqual(self.finish(proc), (0, "ran\n", ""))

    def test_a_signal_ignored_at_start_stays_ignored_for_lock_and_child(self):
        # As under nohup: SIGHUP neither stops the child nor reaches it.
        def ignore_sighup():
            default_signals()
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
        gate = self.path("gate")
        proc = self.start_lock("p", f"echo $$ > {self.path('pid')}; "
                                    f"while [ ! -e {gate} ]; do sleep 0.01; done; echo done",
                               cwd=self.tmp, preexec_fn=ignore_sighup)
        child = self.pid_from("pid")
        hup = 1 << (signal.SIGHUP - 1)
        self.assertTrue(signal_mask(child, "SigIgn") & hup, "the child does not ignore SIGHUP")
        # lock leaves it ignored rather than blocking it to read it, so the kernel discards it.
        self.assertTrue(signal_mask(proc.pid, "SigIgn") & hup, "lock does not ignore SIGHUP")
        self.assertFalse(signal_mask(proc.pid, "SigBlk") & hup, "lock takes SIGHUP in")
        send(proc, signal.SIGHUP)
        open(gate, "w").close()
        self.assertEqual(self.finish(proc), (0, "done\n", ""))


class ScriptBackgroundTest(SignalTestCase):
    """A shell without job control (any script) starts its background commands with SIGINT and
    SIGQUIT ignored. `lock ... & kill -INT $!` must still end lock, as it ends consul lock, while
    the child starts with the dispositions lock was started with."""

    INT = 1 << (signal.SIGINT - 1)

    def in_background(self, *args):
        """lock started as `lock ARGS > out &` by a script (dash); returns the script, whose
        status is lock's, and lock's pid."""
        script = f'"$@" > {self.path("out")} & echo $! > {self.path("lock.pid")}; wait $!'
        p = subprocess.Popen(["/bin/sh", "-c", script, "sh", LOCK, *args], env=self.env, cwd=self.tmp,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=default_signals)
        self.procs.append(p)
        pid = self.pid_from("lock.pid")
        self.kill_later(pid)
        return p, pid

    def test_sigint_stops_the_child_with_sigterm_which_it_does_not_ignore(self):
        # The child keeps SIGINT ignored, as it would without lock: passing SIGINT on would leave
        # it to -kill-after's SIGKILL, so it gets SIGTERM, as consul lock's child does.
        p, pid = self.in_background("-kill-after", "30s", "-preserve-status", "p",
                                    f"echo $$ > {self.path('child')}; exec sleep 1000")
        child = self.pid_from("child")
        self.kill_later(child)
        self.assertTrue(signal_mask(child, "SigIgn") & self.INT, "the child does not ignore SIGINT")
        self.assertTrue(signal_mask(pid, "SigIgn") & (1 << (signal.SIGQUIT - 1)),
                        "lock no longer ignores SIGQUIT, which only SIGINT and SIGTERM override")
        os.kill(pid, signal.SIGINT)
        sent = time.monotonic()
        self.assertEqual(self.finish(p), (128 + signal.SIGTERM, "", ""))
        self.assertLess(time.monotonic() - sent, 5 * SLOW, "the child was left to -kill-after")
        self.assert_released()

    def test_sigint_ends_the_wait(self):
        holder = self.hold()
        p, pid = self.in_background("p", "touch", self.path("ran"))
        wait_for(lambda: self.tickets(), what="the waiter to queue")
        os.kill(pid, signal.SIGINT)
        self.assertEqual(self.finish(p), (1, "", "lock: interrupted by SIGINT while waiting for the lock\n"))
        self.release()
        self.assert_succeeds(holder)
        self.assertFalse(os.path.exists(self.path("ran")))

    def test_sigint_ends_a_watch(self):
        p, pid = self.in_background("-status", "-watch", "p")
        self.wait_file("out", "not held")
        os.kill(pid, signal.SIGINT)
        self.assertEqual(self.finish(p), (0, "", ""))


class ForeignChildrenTest(SignalTestCase):

    def test_a_child_inherited_through_exec_is_left_alone(self):
        # sh's background sleep becomes lock's child when sh execs lock; it is not the tree's.
        script = f"sleep 30 >/dev/null 2>&1 & echo $! > {self.path('bg')}; exec \"$@\""
        r = subprocess.run(["sh", "-c", script, "sh", LOCK, "p", "echo ran"], env=self.env,
                           capture_output=True, text=True, timeout=20 * SLOW,
                           preexec_fn=default_signals)
        bg = self.pid_from("bg")
        self.kill_later(bg)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "ran\n", ""))
        self.assertTrue(pid_alive(bg), "lock stopped a process that was not its child's")

    @unittest.skipUnless(shutil.which("unshare"), "needs unshare")
    def test_as_the_first_process_of_a_pid_namespace_lock_ends_at_once(self):
        # The watchdog is then lock's own child; it must not count as part of the tree.
        r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", LOCK, "-kill-after", "60s",
                            "p", "echo ran"], env=self.env, capture_output=True, text=True,
                           timeout=20 * SLOW, preexec_fn=default_signals)
        if r.stderr.startswith("unshare:"):
            self.skipTest(f"cannot make a pid namespace here: {r.stderr.strip()}")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "ran\n", ""))


class KilledLockTest(SignalTestCase):

    def test_sigkill_to_lock_kills_the_whole_tree(self):
        p = self.start("p", f"echo $$ > {self.path('child')}; "
                            f"sleep 1000 & echo $! > {self.path('bg')}; sleep 1000")
        child, bg = self.pid_from("child"), self.pid_from("bg")
        self.kill_later(child)
        self.kill_later(bg)
        send(p, signal.SIGKILL)
        wait_for(lambda: not pid_alive(child) and not pid_alive(bg), 1.0, "the tree to die")
        p.wait()
        self.assert_released()

    def test_the_watchdog_is_named_and_goes_with_the_tree(self):
        p = self.start("p", f"echo $$ > {self.path('child')}; sleep 1000")
        child = self.pid_from("child")
        self.kill_later(child)
        watchdogs = watchdogs_of(p.pid)
        self.assertEqual(len(watchdogs), 1, f"children of lock: {all_children_of(p.pid)}")
        self.assertEqual(children_of(p.pid), [], "lock's only child is its watchdog")
        self.assertEqual(all_children_of(watchdogs[0]), [child], "the watchdog's is the child")
        send(p, signal.SIGKILL)
        wait_for(lambda: not pid_alive(child) and not pid_alive(watchdogs[0]), 1.0,
                 "the child and the watchdog to end")
        p.wait()
        self.assert_released()

    def watchdog_of_queued(self, waiter, find_watchdog):
        """Waits for `waiter` to queue, and returns its watchdog's pid."""
        wait_for(lambda: self.tickets() or waiter.poll() is not None, what="the waiter to queue")
        if waiter.poll() is not None:
            code, out, err = self.finish(waiter)
            self.skip_if_proc_not_hidden(err)
            self.fail(f"the waiter ended early: {(code, out, err)}")
        watchdog, = wait_for(find_watchdog, what="the waiter's watchdog")
        return watchdog

    def assert_no_child_runs_without(self, watchdog, waiter, holder):
        """Kills the watchdog of `waiter`, a lock queued behind `holder` (from self.hold()) to
        touch "ran", then frees the lock: the waiter must refuse to run its child."""
        os.kill(watchdog, signal.SIGKILL)  # by hand, say
        wait_for(lambda: not pid_alive(watchdog), what="the watchdog to end")
        self.release()
        self.assert_succeeds(holder)
        self.assertEqual(self.finish(waiter),
                         (1, "", f"lock: did not run touch: lock's watchdog (pid {watchdog}) is gone, "
                                 "and without it the child would outlive a killed lock\n"))
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_released()

    def test_no_child_runs_once_the_watchdog_is_gone(self):
        holder = self.hold()
        waiter = self.start("-shell=false", "p", "touch", self.path("ran"))
        watchdog = self.watchdog_of_queued(waiter, lambda: watchdogs_of(waiter.pid))
        self.assert_no_child_runs_without(watchdog, waiter, holder)

    @unittest.skipUnless(shutil.which("unshare"), "needs unshare")
    def test_no_child_runs_once_the_watchdog_is_gone_without_proc(self):
        wrapper = self.hiding_proc()
        holder = self.hold()
        mark = f"LOCK_TEST_WAITER={self.tmp}"
        waiter = self.start("-shell=false", "p", "touch", self.path("ran"), wrapper=wrapper,
                            env=dict(self.env, LOCK_TEST_WAITER=self.tmp))
        watchdog = self.watchdog_of_queued(waiter, lambda: watchdogs_with(mark))
        self.assertIn(watchdog, all_children_of(waiter.pid))
        self.assert_no_child_runs_without(watchdog, waiter, holder)

    def test_sigkill_to_lock_kills_a_daemon_before_the_lock_is_handed_on(self):
        # The daemon holds no descriptor of the lock's: only the watchdog, the tree's subreaper,
        # can find it once lock is gone.
        daemon = self.path("daemon")
        p = self.start("p", f"{DAEMONIZE} {daemon}; sleep 1000")
        pid = self.pid_from("daemon")
        self.kill_later(pid)
        waiter = self.start("p", f"if kill -0 {pid} 2>/dev/null; then echo alive; else echo dead; fi")
        wait_for(lambda: self.tickets(), what="the waiter to queue")
        send(p, signal.SIGKILL)
        killed = time.monotonic()
        wait_for(lambda: not pid_alive(pid), 1.0, "the daemon to die")
        self.assertLess(time.monotonic() - killed, 1.0 * SLOW)
        self.assertEqual(self.finish(waiter), (0, "dead\n", ""))
        p.wait()
        self.assert_released()

    def test_a_child_that_kills_its_watchdog_is_killed_and_lock_says_so(self):
        # The daemon is there too: with the watchdog gone, what is left of the tree comes back to
        # lock, which kills it rather than hold on unguarded.
        p = self.start("p", f"{DAEMONIZE} {self.path('daemon')}; echo $$ > {self.path('child')}; "
                            f"kill -KILL $PPID; sleep 1000")
        child, daemon = self.pid_from("child"), self.pid_from("daemon")
        self.kill_later(child)
        self.kill_later(daemon)
        code, out, err = self.finish(p)
        self.assertEqual((code, out), (1, ""))
        self.assertRegex(err, r"^lock: lock's watchdog \(pid \d+\) was killed by SIGKILL; the "
                              r"child tree was killed, since without the watchdog it would outlive "
                              r"a killed lock\n$")
        self.assertFalse(pid_alive(child) or pid_alive(daemon), "the tree outlived its watchdog")
        self.assert_released()

    def test_a_watchdog_stopped_by_hand_is_continued_at_once(self):
        with open(self.path("stderr"), "w") as stderr:
            p = self.start("-kill-after", "30s", "p",
                           f"trap 'echo got TERM > {self.path('trapped')}; exit 3' TERM; "
                           f"echo $$ > {self.path('child')}; {LOOP}", stderr=stderr)
        self.kill_later(self.pid_from("child"))
        watchdog, = watchdogs_of(p.pid)
        os.kill(watchdog, signal.SIGSTOP)
        said = self.wait_file("stderr", "\n")
        self.assertEqual(said, f"lock: warning: lock's watchdog (pid {watchdog}) was stopped by SIGSTOP; "
                               "continued it\n")
        wait_for(lambda: proc_stat(watchdog)[0] != "T", what="the watchdog to run again")
        send(p, signal.SIGTERM)
        self.assertEqual(self.finish(p)[:2], (0, ""))
        self.assertEqual(read_file(self.path("trapped")), "got TERM\n")

    def test_a_child_that_stops_its_watchdog_and_exits_is_let_go(self):
        # Stopped, the watchdog could neither reap the child nor tell lock: lock continues it.
        p = self.start("p", "kill -STOP $PPID; echo done")
        code, out, err = self.finish(p)
        self.assertEqual((code, out), (0, "done\n"))
        self.assertRegex(err, r"^lock: warning: lock's watchdog \(pid \d+\) was stopped by SIGSTOP; "
                              r"continued it\n$")
        self.assert_released()

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"), "needs root and setpriv")
    def test_a_child_cannot_trace_its_watchdog_to_outlive_a_killed_lock(self):
        # Any process of the user may trace the user's dumpable processes: a child attached to
        # its watchdog would keep it from ever acting, then kill lock and run on unguarded.
        # Traced as root could do it: lock runs as nobody.
        nobody = pwd.getpwnam("nobody")
        os.chmod(self.tmp, 0o755)
        home = self.path("nobody")
        os.mkdir(home)
        os.chown(home, nobody.pw_uid, nobody.pw_gid)
        attacher = ("import ctypes, os, signal, time\n"
                    "libc = ctypes.CDLL(None, use_errno=True)\n"
                    "watchdog = os.getppid()\n"
                    "traced = libc.ptrace(16, watchdog, None, None) == 0\n"  # PTRACE_ATTACH
                    "error = ctypes.get_errno()\n"
                    "open('attach', 'w').write('traced' if traced else os.strerror(error))\n"
                    "stat = open('/proc/%d/stat' % watchdog).read()\n"
                    "lock = int(stat.rsplit(')', 1)[1].split()[1])\n"
                    "open('pids.tmp', 'w').write('%d %d\\n' % (os.getpid(), watchdog))\n"
                    "os.rename('pids.tmp', 'pids')\n"
                    "while not os.path.exists('go'): time.sleep(0.01)\n"
                    "os.kill(lock, signal.SIGKILL)\n"
                    "while True: time.sleep(0.05)\n")
        # Not through pipes: a child that outlives lock would hold them open.
        p = self.start_lock("-shell=false", "p", "python3", "-c", attacher, cwd=home,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(self.env, LOCK_STATE_DIR=os.path.join(home, "state")),
                            wrapper=["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                                     "--clear-groups"])
        child, watchdog = map(int, self.wait_file("nobody/pids", "\n").split())
        self.kill_later(child)
        self.kill_later(watchdog)  # one that is traced stays stopped
        open(os.path.join(home, "go"), "w").close()
        p.wait(timeout=10 * SLOW)
        wait_for(lambda: not pid_alive(child), 2.0, "the child to die with the killed lock")
        self.assertEqual(read_file(os.path.join(home, "attach")), os.strerror(errno.EPERM))

    def test_a_signal_the_child_sends_its_parent_reaches_lock(self):
        # Its parent is lock's watchdog; before there was one, it was lock.
        p = self.start("p", f"trap 'echo got TERM > {self.path('trapped')}; exit 3' TERM; "
                            f"kill -TERM $PPID; {LOOP}")
        self.assertEqual(self.finish(p), (0, "", ""))
        self.assertEqual(read_file(self.path("trapped")), "got TERM\n")


class EscapedProcessTest(SignalTestCase):
    """A process that left the child's process group (setsid) and ignores SIGTERM is stopped all
    the same once the child has exited: SIGTERM at once, SIGKILL after -kill-after. lock, its
    subreaper, finds it in /proc, or without /proc by asking the kernel about every pid."""

    def run_with_an_escaped_process(self, wrapper):
        escaped = self.path("escaped")
        started = time.monotonic()
        p = self.start("-kill-after", "300ms", "p",
                       f"setsid sh -c 'trap \"\" TERM; echo $$ > {escaped}.tmp; "
                       f"mv {escaped}.tmp {escaped}; {LOOP}' & "
                       f"while [ ! -e {escaped} ]; do sleep 0.01; done", wrapper=wrapper)
        pid = self.pid_from("escaped")
        self.kill_later(pid)
        code, out, err = self.finish(p)
        self.skip_if_proc_not_hidden(err)
        self.assertEqual((code, out, err), (0, "", ""))
        self.assertLess(time.monotonic() - started, 0.3 + 3.0 * SLOW)
        self.assertFalse(pid_alive(pid), "the escaped process outlived lock")
        self.assert_released()

    def test_it_is_killed_after_kill_after(self):
        self.run_with_an_escaped_process([])

    @unittest.skipUnless(shutil.which("unshare"), "needs unshare")
    def test_it_is_killed_after_kill_after_without_proc(self):
        self.run_with_an_escaped_process(self.hiding_proc())


if __name__ == "__main__":
    unittest.main()
