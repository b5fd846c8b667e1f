"""An interactive child on a real terminal: with -pass-stdin it owns the terminal while it runs, so
what is typed reaches it and ^C interrupts it, not lock. The terminal is a tmux pane on a private
tmux server."""

import os
import re
import shlex
import socket
import signal
import subprocess
import unittest

from harness import LOCK, LockTestCase, children_of, pid_alive, wait_for

TMUX = "/usr/bin/tmux"


@unittest.skipUnless(os.access(TMUX, os.X_OK), f"needs tmux at {TMUX} for a terminal")
class TerminalTest(LockTestCase):

    def setUp(self):
        super().setUp()
        self.socket = f"lock-e2e-{os.getpid()}-{id(self)}"
        # The server's socket lives in the scratch directory, away from any user's tmux.
        self.tmux_env = {k: v for k, v in self.env.items() if k != "TMUX"}
        self.tmux_env.update(TMUX_TMPDIR=self.tmp, TERM="xterm")
        self.server = None

    def tearDown(self):
        # Before the scratch directory, and the server's socket in it, goes away.
        self.kill_server()
        super().tearDown()

    def tmux(self, *args, check=True):
        return subprocess.run([TMUX, "-L", self.socket, "-f", "/dev/null", *args],
                              env=self.tmux_env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=20, check=check)

    def kill_server(self):
        if self.server is None:
            return
        self.tmux("kill-server", check=False)
        try:
            wait_for(lambda: not pid_alive(self.server), what="the tmux server to exit")
        finally:
            if pid_alive(self.server):
                os.kill(self.server, signal.SIGKILL)

    def open_session(self, *lock_args):
        """Runs lock in a new pane (through a shell that records its exit status) and returns
        lock's pid once it runs."""
        command = ["env", f"LOCK_STATE_DIR={self.state}", "SHELL=/bin/sh", LOCK, *lock_args]
        script = f"{shlex.join(command)}; echo $? > {shlex.quote(self.path('status'))}"
        # The pane stays after lock ends, so that what lock wrote can still be read.
        self.tmux("new-session", "-d", "-s", "t", "-x", "200", "-y", "50", "/bin/sh", "-c", script,
                  ";", "set-option", "-w", "-t", "t", "remain-on-exit", "on")
        self.server, pane = map(int, self.tmux("display-message", "-p", "-t", "t",
                                               "#{pid} #{pane_pid}").stdout.split())
        lock = wait_for(lambda: children_of(pane), what="lock to start in the pane")[0]
        return lock

    def screen(self):
        # -J joins wrapped lines, so a long line never passes for a short one.
        result = self.tmux("capture-pane", "-p", "-J", "-t", "t", check=False)
        return result.stdout if result.returncode == 0 else ""

    def lines(self, line):
        """How many lines of the terminal end with the word `line` (after a prompt or an echoed
        ^C, say), as output does and the command that printed it does not."""
        return len(re.findall(rf"(?m)(?:^|\s|\^C){re.escape(line)}$", self.screen()))

    def wait_screen(self, line, count=1, partial=False):
        try:
            wait_for(lambda: (line in self.screen()) if partial else self.lines(line) >= count,
                     what=f"{count} line(s) {line!r} on the terminal")
        except AssertionError as e:
            raise AssertionError(f"{e}; the terminal shows:\n{self.screen()}") from None

    def assert_ended(self, lock):
        try:
            wait_for(lambda: not pid_alive(lock), what="lock to exit")
        except AssertionError as e:
            raise AssertionError(f"{e}; the terminal shows:\n{self.screen()}") from None
        self.assertEqual(self.wait_file("status", "\n"), "0\n")

    @unittest.skipUnless(os.access("/bin/bash", os.X_OK), "needs bash")
    def test_interactive_shell_reads_the_terminal(self):
        lock = self.open_session("-pass-stdin", "p", "--", "bash", "--norc", "--noprofile")
        self.tmux("send-keys", "-t", "t", "echo held-$CONSUL_LOCK_HELD", "Enter")
        self.wait_screen("held-true")
        self.tmux("send-keys", "-t", "t", "exit", "Enter")
        self.assert_ended(lock)
        self.assertNotIn("lock:", self.screen())
        self.assertEqual(self.prefix_files("p"), [])

    def test_ctrl_c_reaches_the_interactive_child_only(self):
        stop = self.path("stop")
        lock = self.open_session(
            "-verbose", "-pass-stdin", "p",
            f"trap 'echo got-int' INT; echo ready; while [ ! -e {stop} ]; do sleep 0.1; done")
        self.wait_screen("ready")
        for n in (1, 2):
            self.tmux("send-keys", "-t", "t", "C-c")
            self.wait_screen("got-int", n)
            self.assertTrue(pid_alive(lock))
        open(stop, "w").close()
        self.assert_ended(lock)
        screen = self.screen()
        self.assertEqual(self.lines("got-int"), 2, screen)
        # lock is not in the terminal's foreground group: it saw no SIGINT, so it said nothing of
        # one and did not stop the child.
        self.assertRegex(screen, r"Z lock\[\d+\]: ", "no -verbose output")
        self.assertNotIn("SIGINT", screen)
        self.assertNotIn("lock:", screen)

    @unittest.skipUnless(os.access("/bin/bash", os.X_OK), "needs bash for job control")
    def test_ctrl_z_suspends_lock_with_its_child_and_fg_resumes_both(self):
        pane = self.open_bash()
        self.tmux("send-keys", "-t", "t", f"{shlex.quote(LOCK)} -pass-stdin p cat", "Enter")
        lock = wait_for(lambda: children_of(pane), what="lock to start in the shell")[0]
        self.tmux("send-keys", "-t", "t", "one", "Enter")
        self.wait_screen("one", 2)  # typed, then echoed by cat
        self.tmux("send-keys", "-t", "t", "C-z")
        # The shell gets the terminal back because the job it knows, lock, stopped.
        wait_for(lambda: "Stopped" in self.screen(), what="the shell to report the job stopped")
        self.assertEqual(proc_state(lock), "T")
        self.fg_then_end_cat(lock)
        self.assertNotIn("lock:", self.screen())

    @unittest.skipUnless(os.access("/bin/bash", os.X_OK), "needs bash for job control")
    def test_started_in_the_background_the_child_gets_the_terminal_on_fg(self):
        pane = self.open_bash()
        self.tmux("send-keys", "-t", "t", f"{shlex.quote(LOCK)} -pass-stdin p cat &", "Enter")
        lock = wait_for(lambda: [p for p in children_of(pane) if proc_state(p)],
                        what="lock to start in the background")[0]
        # cat reads the terminal from the background and stops; lock stops with it, as a job.
        wait_for(lambda: proc_state(lock) == "T", what="lock to stop with its child")
        self.fg_then_end_cat(lock)

    @unittest.skipUnless(os.access("/bin/bash", os.X_OK), "needs bash")
    def test_a_long_wait_on_a_terminal_says_once_whom_it_waits_for(self):
        holder = self.hold()
        self.open_bash()
        self.tmux("send-keys", "-t", "t", f"{shlex.quote(LOCK)} p echo got-it", "Enter")
        self.wait_screen(f"still waiting for prefix 'p', held by pid {holder.pid} on "
                         f"{socket.gethostname()} since", partial=True)
        self.release()
        self.wait_screen("got-it")
        self.assertEqual(self.screen().count("still waiting"), 1)
        self.assert_succeeds(holder)

    def fg_then_end_cat(self, lock):
        """Brings the stopped job back with fg, checks that cat reads the terminal again, ends it
        with ^D and checks that lock exits 0."""
        self.tmux("send-keys", "-t", "t", "fg", "Enter")
        self.tmux("send-keys", "-t", "t", "two", "Enter")
        self.wait_screen("two", 2)
        self.tmux("send-keys", "-t", "t", "C-d")
        wait_for(lambda: not pid_alive(lock), what="lock to exit")
        self.tmux("send-keys", "-t", "t", "echo status-$?", "Enter")
        self.wait_screen("status-0")

    def open_bash(self):
        """An interactive bash with job control in a new pane; returns its pid."""
        self.tmux("new-session", "-d", "-s", "t", "-x", "200", "-y", "50",
                  "env", f"LOCK_STATE_DIR={self.state}", "SHELL=/bin/sh", "PS1=$ ",
                  "/bin/bash", "--norc", "--noprofile", "-i")
        self.server, pane = map(int, self.tmux("display-message", "-p", "-t", "t",
                                               "#{pid} #{pane_pid}").stdout.split())
        return pane


def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


if __name__ == "__main__":
    unittest.main()
