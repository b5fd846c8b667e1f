"""What the child gets: how it is started ($SHELL -c or exec), its environment, its standard
streams, its own process group, and how its end (or failure to start) becomes lock's exit
status."""

import json
import os
import subprocess
import unittest

from harness import LOCK, LockTestCase, read_file, wait_for

# A shell that records the arguments it was given, one per line, and then does the real work.
LOGGING_SHELL = """#!/bin/sh
printf '%s\\n' "$@" > "{log}"
exec /bin/sh "$@"
"""


class ChildTestCase(LockTestCase):

    def ok(self, *args, env=None):
        r = self.run_lock(*args, env=env)
        self.assertEqual((r.returncode, r.stderr), (0, ""), f"lock {args}")
        return r.stdout

    def status(self, *args):
        """Runs lock and returns (exit status, stderr)."""
        r = self.run_lock(*args)
        return r.returncode, r.stderr

    def make_logging_shell(self):
        log = self.path("shell-argv")
        shell = self.path("logging-shell")
        with open(shell, "w") as f:
            f.write(LOGGING_SHELL.format(log=log))
        os.chmod(shell, 0o755)
        return shell, log


class ShellTest(ChildTestCase):

    def test_child_runs_under_the_users_shell(self):
        shell, log = self.make_logging_shell()
        out = self.ok("p", "echo", "a", "b  c", env=dict(self.env, SHELL=shell))
        # The words are joined with single spaces into one script, as `consul lock` does.
        self.assertEqual(read_file(log).splitlines(), ["-c", "echo a b  c"])
        self.assertEqual(out, "a b c\n")

    def test_without_shell_variable_the_child_runs_under_bin_sh(self):
        for env in ({k: v for k, v in self.env.items() if k != "SHELL"}, dict(self.env, SHELL="")):
            with self.subTest(shell=env.get("SHELL", "unset")):
                cmdline = self.path("cmdline")
                self.ok("p", f"cat /proc/$$/cmdline > {cmdline}; true", env=env)
                argv = read_file(cmdline).split("\0")[:-1]
                self.assertEqual(argv[:2], ["/bin/sh", "-c"])

    def test_no_shell_execs_the_words_directly(self):
        shell, log = self.make_logging_shell()
        out = self.ok("-shell=false", "p", "printf", "[%s]\\n", "a b", " c ", "$HOME", "*",
                      env=dict(self.env, SHELL=shell))
        self.assertEqual(out, "[a b]\n[ c ]\n[$HOME]\n[*]\n")
        self.assertFalse(os.path.exists(log), "the shell was used")

    def test_no_shell_looks_the_command_up_in_path(self):
        bin_dir = self.path("bin")
        os.mkdir(bin_dir)
        tool = os.path.join(bin_dir, "my-tool")
        with open(tool, "w") as f:
            f.write('#!/bin/sh\necho "my-tool $*"\n')
        os.chmod(tool, 0o755)
        env = dict(self.env, PATH=f"{bin_dir}:{self.env.get('PATH', '/usr/bin:/bin')}")
        self.assertEqual(self.ok("-shell=false", "p", "my-tool", "x", env=env), "my-tool x\n")


class EnvironmentTest(ChildTestCase):

    def child_env(self, prefix="p", env=None):
        out = self.ok("-shell=false", prefix, "env", env=env)
        lines = out.splitlines()
        return lines, dict(line.split("=", 1) for line in lines if "=" in line)

    def test_lock_variables(self):
        lines, env = self.child_env("a/b")
        self.assertEqual(env["CONSUL_LOCK_HELD"], "true")
        self.assertEqual(env["LOCK_PREFIX"], "a/b")
        self.assertRegex(env["LOCK_FENCING_TOKEN"], r"^[0-9]+$")
        self.assertTrue(env["LOCK_KEY"].startswith(self.state + "/"), env["LOCK_KEY"])
        self.assertEqual(env["LOCK_STATE_DIR"], self.state, "our own environment is passed on")

    def test_lock_variables_replace_inherited_ones(self):
        inherited = dict(self.env, CONSUL_LOCK_HELD="false", LOCK_PREFIX="other",
                         LOCK_FENCING_TOKEN="x", LOCK_KEY="/nowhere")
        lines, env = self.child_env(env=inherited)
        for var in ("CONSUL_LOCK_HELD", "LOCK_PREFIX", "LOCK_FENCING_TOKEN", "LOCK_KEY"):
            self.assertEqual(sum(line.startswith(var + "=") for line in lines), 1, var)
        self.assertEqual(env["CONSUL_LOCK_HELD"], "true")
        self.assertEqual(env["LOCK_PREFIX"], "p")

    def test_lock_key_is_the_held_slot_file(self):
        # The child's parent is lock's watchdog, whose parent is lock.
        out = self.ok("p", 'test -f "$LOCK_KEY" && '
                           'echo "$LOCK_FENCING_TOKEN $(awk \'{print $4}\' /proc/$PPID/stat)" && '
                           'cat "$LOCK_KEY"')
        first, record = out.split("\n", 1)
        token, lock_pid = first.split()
        record = json.loads(record)
        self.assertEqual(str(record["token"]), token)
        self.assertEqual(str(record["pid"]), lock_pid)
        self.assertEqual(record["prefix"], "p")

    def test_fencing_token_rises_on_every_acquisition(self):
        tokens = [int(self.child_env()[1]["LOCK_FENCING_TOKEN"]) for _ in range(3)]
        self.assertLess(tokens[0], tokens[1])
        self.assertLess(tokens[1], tokens[2])


class DescriptorsTest(ChildTestCase):
    """The local backend opens every descriptor of its own close-on-exec and closes nothing else at
    the child's exec: the child gets stdio, what our caller passed on, and the slot file's."""

    def start_waiting_child(self, passed, gate):
        """A lock given `passed` whose child writes its pid, then waits for release(gate)."""
        return self.start_lock("p", f"echo $$ > {self.path('pid.' + gate)}; "
                               f"while [ ! -e {self.path(gate)} ]; do sleep 0.01; done",
                               pass_fds=(passed.fileno(),))

    def assert_only_the_callers_and_the_slots(self, gate, passed):
        pid = self.wait_file("pid." + gate, text="\n").strip()
        fd_dir = f"/proc/{pid}/fd"
        fds = {int(fd): os.readlink(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir)}
        self.assertEqual(fds.pop(passed.fileno()), os.path.realpath(self.path("passed")))
        slot_file = os.path.realpath(os.path.join(self.state, "p", "slot.0"))
        slot, = [fd for fd, to in fds.items() if to == slot_file]
        self.assertEqual(sorted(fds), [0, 1, 2, slot])

    def test_uncontended(self):
        with open(self.path("passed"), "w") as passed:
            p = self.start_waiting_child(passed, "go")
            self.assert_only_the_callers_and_the_slots("go", passed)
        self.release("go")
        self.assert_succeeds(p)

    def test_after_waiting_in_line(self):
        holder = self.hold()
        with open(self.path("passed"), "w") as passed:
            waiter = self.start_waiting_child(passed, "go")
            wait_for(self.tickets, what="the waiter to queue")
            self.release()
            self.assert_succeeds(holder)
            self.assert_only_the_callers_and_the_slots("go", passed)
        self.release("go")
        self.assert_succeeds(waiter)


class StreamsTest(ChildTestCase):

    def test_stdin_is_dev_null_by_default(self):
        self.assertEqual(self.ok("-shell=false", "p", "readlink", "/proc/self/fd/0"),
                         "/dev/null\n")
        # Our stdin stays open and unread: a child reading it would block and keep lock running.
        p = self.start_lock("p", "cat", stdin=subprocess.PIPE)
        p.stdin.write("not for the child\n")
        p.stdin.flush()
        rc, out, err = self.finish(p)
        self.assertEqual((rc, out, err), (0, "", ""))

    def test_pass_stdin_gives_the_child_our_stdin(self):
        p = self.start_lock("-pass-stdin", "p", "cat", stdin=subprocess.PIPE)
        out, err = p.communicate("line one\nline two\n", timeout=20)
        self.assertEqual((p.returncode, out, err), (0, "line one\nline two\n", ""))

    def test_stdout_and_stderr_are_inherited(self):
        out = self.path("out")
        with open(out, "w") as f:
            # The very files lock has, not copies relayed through pipes.
            same = '[ "$(readlink /proc/$$/fd/{0})" = "$(readlink /proc/$PPID/fd/{0})" ]'
            r = subprocess.run([LOCK, "p", f"echo to-out; echo to-err >&2; {same.format(1)} && "
                                           f"{same.format(2)} && echo same-files"],
                               env=self.env, stdin=subprocess.DEVNULL, stdout=f,
                               stderr=subprocess.PIPE, text=True, timeout=30)
        self.assertEqual((r.returncode, r.stderr), (0, "to-err\n"))
        self.assertEqual(read_file(out), "to-out\nsame-files\n")


class ProcessGroupTest(ChildTestCase):

    def test_child_leads_its_own_process_group(self):
        # The child's parent is lock's watchdog, in a group of its own; the watchdog's is lock.
        p = self.start_lock("p", f"cat /proc/$$/stat > {self.path('child')}; "
                                 f"cat /proc/$PPID/stat > {self.path('watchdog')}; "
                                 f"cat /proc/$(awk '{{print $4}}' /proc/$PPID/stat)/stat "
                                 f"> {self.path('lock')}")
        self.assertEqual(self.finish(p)[0], 0)
        child, watchdog, lock = (read_file(self.path(name)) for name in ("child", "watchdog", "lock"))
        child_pid = int(child.split()[0])
        watchdog_pid = int(watchdog.split()[0])
        child, watchdog, lock = (text.rsplit(")", 1)[1].split() for text in (child, watchdog, lock))
        self.assertEqual(int(child[1]), watchdog_pid)
        self.assertEqual(int(watchdog[1]), p.pid, "the watchdog's parent is lock")
        self.assertEqual(int(child[2]), child_pid, "pgid == pid")
        self.assertEqual(int(lock[2]), os.getpgrp(), "lock stays in its caller's group")
        self.assertNotIn(int(watchdog[2]), (child_pid, os.getpgrp()),
                         "the watchdog is in neither the child's group nor lock's")
        self.assertEqual(len({int(child[3]), int(watchdog[3]), int(lock[3])}), 1,
                         "all three in lock's session")


class ExecFailureTest(ChildTestCase):

    def assert_cannot_run(self, args, command, reason, code):
        rc, err = self.status(*args)
        self.assertEqual((rc, err), (code, f"lock: cannot run {command}: {reason}\n"))
        # The lock was released and nothing is left of the prefix.
        self.assertEqual(self.prefix_files("p"), [])
        self.assertEqual(self.ok("-timeout", "2s", "-shell=false", "p", "echo", "next"),
                         "next\n")

    def test_command_not_found(self):
        for flags, code in (([], 1), (["-preserve-status"], 127), (["-child-exit-code"], 2)):
            with self.subTest(flags=flags):
                self.assert_cannot_run([*flags, "-shell=false", "p", "no-such-command-x"],
                                       "no-such-command-x", "No such file or directory", code)

    def test_command_not_executable(self):
        script = self.path("not-executable")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho ran\n")
        os.chmod(script, 0o644)
        for flags, code in (([], 1), (["-preserve-status"], 126), (["-child-exit-code"], 2)):
            with self.subTest(flags=flags):
                self.assert_cannot_run([*flags, "-shell=false", "p", script], script,
                                       "Permission denied", code)

    def test_shell_not_found(self):
        self.env["SHELL"] = self.path("no-such-shell")
        self.assert_cannot_run(["p", "echo", "hi"], self.env["SHELL"], "No such file or directory",
                               1)


class ExitStatusTest(ChildTestCase):

    def test_child_status_is_not_ours_by_default(self):
        self.assertEqual(self.status("p", "exit 3"), (0, ""))
        self.assertEqual(self.status("p", "kill -KILL $$"), (0, ""))

    def test_child_exit_code(self):
        self.assertEqual(self.status("-child-exit-code", "p", "exit 3"), (2, ""))
        self.assertEqual(self.status("-child-exit-code", "p", "exit 0"), (0, ""))
        self.assertEqual(self.status("-child-exit-code", "p", "kill -KILL $$"), (2, ""))

    def test_preserve_status(self):
        self.assertEqual(self.status("-preserve-status", "p", "exit 3"), (3, ""))
        self.assertEqual(self.status("-preserve-status", "p", "exit 0"), (0, ""))
        self.assertEqual(self.status("-preserve-status", "p", "exit 255"), (255, ""))
        self.assertEqual(self.status("-preserve-status", "p", "kill -KILL $$"), (137, ""))
        self.assertEqual(self.status("-preserve-status", "p", "kill -TERM $$"), (143, ""))


if __name__ == "__main__":
    unittest.main()
