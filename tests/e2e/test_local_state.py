"""The local backend's files: limit conflicts, fencing tokens, the holder record, cleanup, recovery
after a crash, the state directory's safety checks, and loss of the lock files while held."""

import calendar
import errno
import json
import os
import pwd
import re
import resource
import shutil
import socket
import stat
import subprocess
import time
import unittest

from harness import LOCK, PATH_CHECK_PERIOD, SLOW, LockTestCase, prefixes_left, read_file, wait_for


def group_members(pgid):
    """Live processes of a process group."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry))
    return members


class LocalStateTest(LockTestCase):

    def assert_refused(self, result, message):
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertTrue(result.stderr.startswith(f"lock: {message}"), result.stderr)
        self.assertEqual(result.stderr.count("\n"), 1, result.stderr)

    def prefix_dir(self, name="p"):
        return os.path.join(self.state, name)

    # Limit conflicts.

    def check_conflict(self, held_with, asked, message):
        holder = self.hold("-n", str(held_with))
        files = self.prefix_files("p")
        ran = self.path("ran")
        self.assert_refused(self.run_lock("-n", str(asked), "p", f"touch {ran}"), message)
        self.assertFalse(os.path.exists(ran))
        self.assertEqual(self.prefix_files("p"), files)
        self.release()
        self.assert_succeeds(holder)
        # Nobody uses the prefix any more, so the other limit is fine now.
        r = self.run_lock("-n", str(asked), "p", f"touch {ran}")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertTrue(os.path.exists(ran))

    def test_semaphores_with_different_limits_conflict(self):
        self.check_conflict(2, 3, "semaphore limit conflict (lock: 2, local: 3)")

    def test_semaphore_on_a_prefix_used_as_a_lock_conflicts(self):
        self.check_conflict(1, 2, "Existing key does not match semaphore use")

    def test_lock_on_a_prefix_used_as_a_semaphore_conflicts(self):
        self.check_conflict(2, 1, "Existing key does not match lock use")

    def test_limit_stays_while_any_holder_remains(self):
        first = self.hold("-n", "2", gate="first")
        second = self.hold("-n", "2", gate="second")
        self.release("first")
        self.assert_succeeds(first)
        self.assert_refused(self.run_lock("-n", "1", "p", "true"),
                            "Existing key does not match lock use")
        self.assert_refused(self.run_lock("-n", "3", "p", "true"),
                            "semaphore limit conflict (lock: 2, local: 3)")
        self.release("second")
        self.assert_succeeds(second)
        r = self.run_lock("-n", "1", "p", "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    # Fencing tokens.

    def test_fencing_tokens_rise_across_runs_and_cleanups(self):
        tokens = self.path("tokens")
        for run in range(6):
            if run == 3:
                # A wiped state directory (say, after a reboot) must not restart the count.
                shutil.rmtree(self.state)
            r = self.run_lock("p", f"echo $LOCK_FENCING_TOKEN >> {tokens}")
            self.assertEqual((r.returncode, r.stderr), (0, ""))
            # The prefix's files went with the last one out, counter included.
            self.assertEqual(self.prefixes_left(), [])
        values = [int(t) for t in read_file(tokens).split()]
        self.assertEqual(len(values), 6)
        for earlier, later in zip(values, values[1:]):
            self.assertLess(earlier, later, values)

    def test_fencing_tokens_rise_from_holder_to_waiter(self):
        tokens = self.path("tokens")
        first = self.hold("-n", "2", gate="first", before=f"echo $LOCK_FENCING_TOKEN >> {tokens}; ")
        second = self.hold("-n", "2", gate="second", before=f"echo $LOCK_FENCING_TOKEN >> {tokens}; ")
        waiter = self.start_lock("-n", "2", "p", f"echo $LOCK_FENCING_TOKEN >> {tokens}")
        wait_for(self.tickets, what="the waiter's ticket")
        self.release("first")
        self.assert_succeeds(waiter)
        self.release("second")
        self.assert_succeeds(first)
        self.assert_succeeds(second)
        values = [int(t) for t in read_file(tokens).split()]
        self.assertEqual(len(values), 3)
        self.assertTrue(values[0] < values[1] < values[2], values)

    # The holder record.

    def read_record(self, slot=0):
        with open(os.path.join(self.prefix_dir(), f"slot.{slot}")) as f:
            text = f.read()
        self.assertTrue(text.endswith("\n") and text.count("\n") == 1, text)
        return json.loads(text)

    def test_slot_file_records_the_holder(self):
        env_file = self.path("env")
        script = (f"echo $LOCK_FENCING_TOKEN $LOCK_KEY > {env_file}; touch {self.path('held')}; "
                  f"while [ ! -e {self.path('release')} ]; do sleep 0.01; done")
        # Several words, which the default name joins with spaces as the shell command does.
        holder = self.start_lock("p", *script.split(" "))
        wait_for(lambda: os.path.exists(self.path("held")) or holder.poll() is not None,
                 what="the holder's child to start")
        if holder.poll() is not None:
            self.fail(f"the holder ended early: {self.finish(holder)}")
        token, key = read_file(env_file).split()
        self.assertEqual(key, os.path.join(self.prefix_dir(), "slot.0"))
        before = time.time()
        record = self.read_record()
        self.assertEqual(set(record), {"prefix", "name", "host", "pid", "since", "token"})
        self.assertEqual(record["prefix"], "p")
        self.assertEqual(record["name"], f"lock for '{script}' at 'p'")
        self.assertEqual(record["host"], socket.gethostname())
        self.assertEqual(record["pid"], holder.pid)
        self.assertEqual(record["token"], int(token))
        self.assertRegex(record["since"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        since = calendar.timegm(time.strptime(record["since"], "%Y-%m-%dT%H:%M:%SZ"))
        self.assertLess(abs(since - before), 60 * SLOW)
        self.release()
        self.assert_succeeds(holder)

    def test_name_flag_names_the_holder(self):
        holder = self.hold("-name", "nightly backup")
        record = self.read_record()
        self.assertEqual(record["name"], "nightly backup")
        self.assertEqual(record["pid"], holder.pid)
        self.release()
        self.assert_succeeds(holder)

    def test_each_semaphore_holder_records_its_own_slot(self):
        first = self.hold("-n", "2", "-name", "first", gate="first",
                          before=f"echo $LOCK_KEY > {self.path('key.first')}; ")
        second = self.hold("-n", "2", "-name", "second", gate="second",
                           before=f"echo $LOCK_KEY > {self.path('key.second')}; ")
        records = {}
        for name, proc in (("first", first), ("second", second)):
            key = read_file(self.path(f"key.{name}")).strip()
            self.assertRegex(key, "^" + re.escape(self.prefix_dir()) + r"/slot\.[01]$")
            with open(key) as f:
                records[key] = json.loads(f.read())
            self.assertEqual((records[key]["name"], records[key]["pid"]), (name, proc.pid))
        self.assertEqual(len(records), 2)
        self.release("first")
        self.release("second")
        self.assert_succeeds(first)
        self.assert_succeeds(second)

    # Cleanup.

    def test_last_one_out_removes_the_prefix_directory(self):
        r = self.run_lock("p", "true")
        self.assertEqual(r.returncode, 0)
        self.assertEqual(self.prefixes_left(), [])
        holder = self.hold("-n", "2", gate="first")
        second = self.hold("-n", "2", gate="second")
        waiter = self.start_lock("-n", "2", "p", "true")
        wait_for(self.tickets, what="the waiter's ticket")
        self.release("second")
        self.assert_succeeds(second)
        self.assert_succeeds(waiter)
        self.assertNotEqual(self.prefix_files("p"), [])
        self.release("first")
        self.assert_succeeds(holder)
        self.assertTrue(os.path.isdir(self.state))
        self.assertEqual(self.prefixes_left(), [])

    # A killed lock.

    def kill_holder(self, *args):
        """Starts a holder whose shell runs a plain sleep, SIGKILLs it once the child has started,
        and checks that the whole child tree died with it."""
        log_path = self.path("holder.log")
        with open(log_path, "w") as log:
            # The sleep is the shell's child, so only the watchdog, not the direct child's
            # parent-death signal, can stop it. Output goes to a file: the pipes of a survivor
            # would never close.
            holder = self.start_lock("-verbose", *args, "p", "sleep 1000; true",
                                     stdout=subprocess.DEVNULL, stderr=log)
        started = wait_for(lambda: re.search(r"started the child, pid (\d+)", read_file(log_path)),
                           what="the child to start")
        child = int(started.group(1))
        wait_for(lambda: len(group_members(child)) == 2, what="the shell to start its sleep")
        self.assertTrue(read_file(os.path.join(self.prefix_dir(), "slot.0")))
        holder.kill()
        holder.wait()
        wait_for(lambda: not group_members(child), timeout=5.0, what="the child's group to die")

    def test_killed_holder_takes_its_child_along_and_frees_the_lock(self):
        self.kill_holder()
        start = time.monotonic()
        r = self.run_lock("-timeout", "10s", "p", f"touch {self.path('ran')}")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertLess(time.monotonic() - start, 2.0 * SLOW)
        self.assertTrue(os.path.exists(self.path("ran")))

    def test_prefix_left_by_a_killed_holder_accepts_any_limit(self):
        self.kill_holder("-n", "2")
        r = self.run_lock("-timeout", "10s", "-n", "1", "p", "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.prefixes_left(), [])

    # Names and permissions.

    def test_a_limit_beyond_the_open_file_limit_is_refused_up_front(self):
        # The head of the queue holds one descriptor per slot.
        def few_files():
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        r = subprocess.run([LOCK, "-n", "300", "p", f"touch {self.path('ran')}"], env=self.env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           preexec_fn=few_files, timeout=30 * SLOW)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "lock: -n 300 needs more open files than the limit of 256 "
                                   "(ulimit -n) (see lock -help)\n")
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assertEqual(self.prefixes_left(), [])

    def test_no_prefix_takes_the_place_of_the_fencing_counter(self):
        for prefix in ("fence", "@fence", "%40fence"):
            with self.subTest(prefix=prefix):
                r = self.run_lock(prefix, "echo $LOCK_FENCING_TOKEN")
                self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(os.listdir(self.state), ["@fence"])

    def test_prefix_maps_to_a_percent_encoded_directory(self):
        cases = {"a/b c": "a%2Fb%20c", "x:y~z/\u00e9": "x%3Ay%7Ez%2F%C3%A9",
                 "Az-09_.x": "Az-09_.x", "50%": "50%25"}
        for prefix, directory in cases.items():
            with self.subTest(prefix=prefix):
                listing = self.path("listing")
                r = self.run_lock(prefix, f"ls -I @fence {self.state} > {listing}; "
                                          f"echo $LOCK_KEY >> {listing}")
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertEqual(read_file(listing).splitlines(),
                                 [directory, os.path.join(self.state, directory, "slot.0")])

    def test_missing_state_directory_is_created_private(self):
        for how in ("flag", "environment"):
            with self.subTest(how=how):
                state = self.path(f"{how}/nested/state")
                if how == "flag":
                    r = self.run_lock("-state-dir", state, "p", "true")
                else:
                    r = self.run_lock("p", "true", env=dict(self.env, LOCK_STATE_DIR=state))
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertEqual(stat.S_IMODE(os.stat(state).st_mode), 0o700)
                self.assertEqual(prefixes_left(state), [])

    def test_modes_do_not_depend_on_the_umask_and_the_child_gets_the_callers(self):
        for mask in (0o277, 0o077, 0o777, 0o000):
            with self.subTest(umask=oct(mask)):
                state = self.path(f"umask{mask:o}/state")
                env = dict(self.env, LOCK_STATE_DIR=state)
                # The holder's child records the modes of what lock made, and its own umask.
                modes = self.path(f"modes{mask:o}")
                see = (f"umask > {modes}; cd {state} && stat -c '%n %a' . p p/meta p/slot.0 "
                       f"@fence >> {modes}")
                for run in ("first", "second"):
                    r = subprocess.run(["sh", "-c", f'umask {mask:o} && exec "$@"', "sh", LOCK,
                                        "p", see], env=env, stdin=subprocess.DEVNULL,
                                       capture_output=True, text=True, timeout=10 * SLOW)
                    self.assertEqual((r.returncode, r.stderr), (0, ""), run)
                    lines = read_file(modes).splitlines()
                    self.assertEqual(lines[0], f"{mask:04o}")
                    self.assertEqual(lines[1:], [". 700", "p 700", "p/meta 600", "p/slot.0 600",
                                                 "@fence 600"])

    def test_an_empty_state_dir_flag_is_an_error(self):
        r = self.run_lock("-state-dir=", "p", "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertTrue(r.stderr.startswith("lock: -state-dir must not be empty"), r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))

    def test_prefix_directory_that_is_a_symlink_is_refused(self):
        elsewhere = self.path("elsewhere")
        os.mkdir(elsewhere)
        os.mkdir(self.state)
        for target in (elsewhere, self.path("missing")):
            with self.subTest(target=target):
                link = self.prefix_dir()
                os.symlink(target, link)
                r = self.run_lock("-timeout", "5s", "p", f"touch {self.path('ran')}")
                self.assert_refused(r, "")
                self.assertIn(link, r.stderr)
                self.assertFalse(os.path.exists(self.path("ran")))
                self.assertEqual(os.listdir(elsewhere), [])
                self.assertFalse(os.path.exists(self.path("missing")))
                self.assertEqual(os.readlink(link), target)
                os.unlink(link)

    def run_as_nobody(self, plant, *args):
        """Runs lock as user nobody, with its default state directory, on a private empty
        /run/lock: a tmpfs in a mount namespace of its own, so the machine's is untouched.
        `plant` is shell run as root first."""
        if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("unshare"):
            self.skipTest("needs root, setpriv and unshare to run as another user")
        nobody = pwd.getpwnam("nobody")
        env = dict(self.env)
        env.pop("LOCK_STATE_DIR")
        script = (f"mount -t tmpfs -o mode=1777 none /run/lock && {plant} && "
                  f'exec setpriv --reuid={nobody.pw_uid} --regid={nobody.pw_gid} --clear-groups "$@"')
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                            "sh", LOCK, *args], env=env, cwd="/", stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30 * SLOW)
        if r.stderr.startswith("unshare:"):
            self.skipTest(f"cannot make a mount namespace here: {r.stderr.strip()}")
        return r

    def shared_dir(self):
        """A scratch directory user nobody can write to."""
        os.chmod(self.tmp, 0o755)
        out = self.path("shared")
        os.mkdir(out)
        os.chmod(out, 0o777)
        return out

    def test_default_state_directory_must_be_private(self):
        nobody = pwd.getpwnam("nobody").pw_uid
        planted = f"/run/lock/lock-{nobody}"
        out = self.shared_dir()
        for owner, mode in ((nobody, 0o777), (0, 0o755)):
            with self.subTest(owner=owner, mode=oct(mode)):
                r = self.run_as_nobody(f"mkdir {planted} && chmod {mode:o} {planted} && "
                                       f"chown {owner} {planted}", "p", f"touch {out}/ran")
                self.assert_refused(r, f"state directory {planted} is not private")
                self.assertFalse(os.path.exists(f"{out}/ran"))

    def test_default_state_directory_made_under_a_strict_umask_is_repaired(self):
        # An earlier version made it under umask 0277: ours, closed to others, but 0500.
        nobody = pwd.getpwnam("nobody").pw_uid
        planted = f"/run/lock/lock-{nobody}"
        out = self.shared_dir()
        r = self.run_as_nobody(f"mkdir -m 500 {planted} && chown {nobody} {planted}", "p",
                               f"stat -c '%a' {planted} > {out}/st")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(read_file(f"{out}/st"), "700\n")

    def test_default_state_directory_is_the_same_in_every_session(self):
        # Not under $XDG_RUNTIME_DIR: cron does not set it, and a login session's goes at logout.
        nobody = pwd.getpwnam("nobody").pw_uid
        out = self.shared_dir()
        for runtime_dir in ("/run/user/65534", None):
            with self.subTest(XDG_RUNTIME_DIR=runtime_dir):
                self.env.pop("XDG_RUNTIME_DIR", None)
                if runtime_dir:
                    self.env["XDG_RUNTIME_DIR"] = runtime_dir
                r = self.run_as_nobody(":", "p", f"stat -c '%u %a' /run/lock/lock-{nobody} > {out}/st")
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertEqual(read_file(f"{out}/st"), f"{nobody} 700\n")

    # Loss of the lock files while held.

    def hold_until_lost(self):
        # Quiet, so that the shell's "Terminated" for its sleep does not mix with lock's message.
        return self.hold(before=f"exec 2>/dev/null; trap 'echo TERM >> {self.path('log')}; exit 0' TERM; ")

    def assert_lost(self, holder, alone=True):
        """The holder's loss, as it says it; the prefix then usable again, and, with no other run
        `alone`, nothing left of it."""
        self.wait_file("log", "TERM")
        code, _, err = self.finish(holder)
        self.assertEqual(code, 1)
        self.assertEqual(err, f"lock: lock lost: the lock file {self.prefix_dir()}/slot.0 was removed, "
                              "replaced or moved; the child was stopped\n")
        # The prefix is usable again.
        r = self.run_lock("-timeout", "10s", "p", "true")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        if alone:
            self.assertEqual(self.prefixes_left(), [])

    def assert_lost_to_a_newcomer(self, take_the_path_away):
        """Takes the holder's path away; a newcomer then takes the lock at the same path at once,
        and the holder notices within the period of its path check and stops its child."""
        tokens = self.path("tokens")
        holder = self.hold(before=f"exec 2>/dev/null; echo $LOCK_FENCING_TOKEN >> {tokens}; "
                                  f"trap 'echo TERM >> {self.path('log')}; exit 0' TERM; ")
        key = os.path.join(self.prefix_dir(), "slot.0")
        take_the_path_away()
        taken = time.monotonic()
        newcomer = self.run_lock("-timeout", "10s", "p", f"echo $LOCK_FENCING_TOKEN >> {tokens}")
        self.assertEqual((newcomer.returncode, newcomer.stderr), (0, ""))
        self.wait_file("log", "TERM")
        self.assertLess(time.monotonic() - taken, PATH_CHECK_PERIOD + 1.0 * SLOW)
        code, _, err = self.finish(holder)
        self.assertEqual((code, err), (1, f"lock: lock lost: the lock file {key} was removed, "
                                          "replaced or moved; the child was stopped\n"))
        held, new = map(int, read_file(tokens).split())
        self.assertGreater(new, held)

    def test_renaming_a_directory_above_the_state_directory_stops_the_child(self):
        above = self.path("above")
        self.state = os.path.join(above, "state")
        self.env["LOCK_STATE_DIR"] = self.state
        self.assert_lost_to_a_newcomer(lambda: os.rename(above, self.path("moved")))

    def test_mounting_over_the_state_directory_stops_the_child(self):
        empty = self.path("empty")
        os.mkdir(empty)
        mounted = []

        def mount_over():
            r = subprocess.run(["mount", "--bind", empty, self.state], capture_output=True, text=True)
            if r.returncode != 0:
                self.skipTest(f"cannot bind-mount here: {r.stderr.strip()}")
            mounted.append(self.state)

        try:
            self.assert_lost_to_a_newcomer(mount_over)
        finally:
            if mounted:
                subprocess.run(["umount", self.state], check=True)

    def test_waiters_start_over_when_the_state_directory_is_removed(self):
        holder = self.hold_until_lost()
        log = self.path("sections")
        waiters = [self.start_lock("-timeout", "20s", "p", f"echo start >> {log}; sleep 0.1; "
                                                           f"echo end >> {log}") for _ in range(2)]
        wait_for(lambda: sum(f.startswith("q.") for f in os.listdir(self.prefix_dir())) == 2,
                 what="both waiters to queue")
        subprocess.run(["rm", "-rf", self.state], check=True)
        self.assert_lost(holder, alone=False)  # the waiters may still be at it
        for w in waiters:
            self.assert_succeeds(w)
        self.assertEqual(read_file(log).split(), ["start", "end"] * 2)
        self.assertEqual(self.prefixes_left(), [])

    def test_removing_the_prefix_directory_stops_the_child(self):
        holder = self.hold_until_lost()
        subprocess.run(["rm", "-rf", self.prefix_dir()], check=True)
        self.assert_lost(holder)

    def test_removing_the_slot_file_stops_the_child(self):
        holder = self.hold_until_lost()
        os.unlink(os.path.join(self.prefix_dir(), "slot.0"))
        self.assert_lost(holder)

    def test_replacing_the_slot_file_stops_the_child(self):
        holder = self.hold_until_lost()
        other = os.path.join(self.prefix_dir(), "other")
        with open(other, "w") as f:
            f.write(read_file(os.path.join(self.prefix_dir(), "slot.0")))
        os.rename(other, os.path.join(self.prefix_dir(), "slot.0"))
        self.assert_lost(holder)


class OutOfSpaceTest(LockTestCase):
    """The state directory's file system runs out of inodes or space at any step of a run: the
    run fails with a message that says so, and leaves nothing behind."""

    def setUp(self):
        super().setUp()
        self.mount = self.path("small")
        os.mkdir(self.mount)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=64", "tmpfs", self.mount],
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest(f"cannot mount a small tmpfs here: {r.stderr.strip()}")
        self.state = os.path.join(self.mount, "state")
        self.env["LOCK_STATE_DIR"] = self.state
        os.mkdir(self.state, 0o700)
        self.fillers = []

    def tearDown(self):
        for p in self.procs:  # their descriptors would keep the file system busy
            if p.poll() is None:
                p.kill()
                p.wait()
        # Lazily: a child the watchdog is still killing may hold a file there for a moment.
        subprocess.run(["umount", "--lazy", self.mount], check=True)
        super().tearDown()

    def free(self):
        for name in self.fillers:
            os.unlink(name)
        self.fillers = []

    def leave_inodes(self, count):
        """Takes every free inode of the file system but `count`."""
        self.free()
        while True:
            name = os.path.join(self.mount, f"filler.{len(self.fillers)}")
            try:
                os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except OSError as e:
                self.assertEqual(e.errno, errno.ENOSPC)
                break
            self.fillers.append(name)
        for _ in range(count):
            os.unlink(self.fillers.pop())

    def leave_pages(self, count):
        """Takes every free page of the file system but `count`."""
        self.free()
        name = os.path.join(self.mount, "filler")
        page = os.sysconf("SC_PAGE_SIZE")
        fd = os.open(name, os.O_CREAT | os.O_WRONLY)
        self.fillers.append(name)
        try:
            while True:
                try:
                    os.write(fd, b"x" * page)
                except OSError as e:
                    self.assertEqual(e.errno, errno.ENOSPC)
                    break
            os.ftruncate(fd, os.fstat(fd).st_size - count * page)
        finally:
            os.close(fd)

    def assert_full_or_done(self, result, ran):
        """Either the child ran, or lock failed for want of space and the child did not run."""
        if result.returncode == 0:
            self.assertEqual(result.stderr, "")
            self.assertTrue(os.path.exists(ran))
            os.unlink(ran)
            return True
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr, r"^lock: cannot (create|open|write) [^\n]*: "
                                        r"No space left on device\n$")
        self.assertFalse(os.path.exists(ran))
        return False

    def test_out_of_inodes_on_the_way_to_a_free_lock(self):
        # The prefix's directory, meta, slot.0 and the state directory's fencing counter.
        outcomes = []
        for count in range(5):
            with self.subTest(free_inodes=count):
                if os.path.exists(os.path.join(self.state, "@fence")):
                    os.unlink(os.path.join(self.state, "@fence"))
                self.leave_inodes(count)
                ran = self.path("ran")
                outcomes.append(self.assert_full_or_done(self.run_lock("p", f"touch {ran}"), ran))
                self.assertEqual(self.prefixes_left(), [])
        self.assertEqual(outcomes, [False, False, False, False, True])

    def test_out_of_inodes_on_the_way_into_the_queue(self):
        holder = self.hold()
        files = self.prefix_files("p")
        for count in range(2):  # a ticket takes one
            with self.subTest(free_inodes=count):
                self.leave_inodes(count)
                ran = self.path("ran")
                r = self.run_lock("-timeout", "200ms", "p", f"touch {ran}")
                if count == 0:
                    self.assertFalse(self.assert_full_or_done(r, ran))
                else:
                    self.assertEqual(r.returncode, 1)
                    self.assertIn("timed out waiting for prefix 'p'", r.stderr)
                self.assertEqual(self.prefix_files("p"), files)
        self.free()
        self.release()
        self.assert_succeeds(holder)
        self.assertEqual(self.prefixes_left(), [])

    def test_out_of_space_on_the_way_to_a_free_lock(self):
        # A page for meta and one for slot.0's holder record (the fencing counter has its own).
        self.assertEqual(self.run_lock("p", "true").returncode, 0)
        outcomes = []
        for count in range(3):
            with self.subTest(free_pages=count):
                self.leave_pages(count)
                ran = self.path("ran")
                outcomes.append(self.assert_full_or_done(self.run_lock("p", f"touch {ran}"), ran))
                self.assertEqual(self.prefixes_left(), [])
        self.assertEqual(outcomes, [False, False, True])

    def test_out_of_space_on_the_way_into_the_queue(self):
        holder = self.hold()
        files = self.prefix_files("p")
        self.leave_pages(0)
        ran = self.path("ran")
        self.assertFalse(self.assert_full_or_done(self.run_lock("-timeout", "5s", "p", f"touch {ran}"), ran))
        self.assertEqual(self.prefix_files("p"), files)
        self.free()
        self.release()
        self.assert_succeeds(holder)
        self.assertEqual(self.prefixes_left(), [])


if __name__ == "__main__":
    unittest.main()
