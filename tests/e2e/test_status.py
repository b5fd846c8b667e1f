"""lock -status: who holds a prefix and who waits, for people and (with -json) for scripts; the
exit status says whether the prefix is held."""

import base64
import json
import os
import signal
import socket
import subprocess
import time
import unittest

from harness import LOCK, SLOW, LockTestCase, Watch, assert_coalesced, lock_loop, most_states, send, wait_for


class StatusTest(LockTestCase):

    def status(self, *args, prefix="p"):
        return self.run_lock("-status", *args, prefix)

    def test_an_unused_prefix_is_not_held(self):
        r = self.status()
        self.assertEqual((r.returncode, r.stdout, r.stderr), (3, "prefix 'p': not held\n", ""))
        self.assertFalse(os.path.exists(self.state), "looking must not create anything")

    def test_a_held_lock_names_its_holder(self):
        holder = self.hold("-name", "nightly backup")
        r = self.status()
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertRegex(r.stdout, rf"^prefix 'p': held \(lock\)\n  holder: pid {holder.pid} on "
                                   rf"{socket.gethostname()} since \S+Z, name 'nightly backup', "
                                   r"fencing token \d+\n$")
        self.release()
        self.assert_succeeds(holder)
        self.assertEqual(self.status().returncode, 3)

    def test_json_lists_holders_and_waiters(self):
        first = self.hold("-n", "2", gate="a")
        second = self.hold("-n", "2", gate="b")
        waiter = self.start_lock("-n", "2", "-name", "third", "p", "true")
        wait_for(self.tickets, what="the third to queue")
        # Its queue file appears a moment before the record in it is complete.
        wait_for(lambda: json.loads(self.status("-json").stdout)["waiters"], what="the third's record")
        r = self.status("-json")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        out = json.loads(r.stdout)
        self.assertEqual((out["prefix"], out["backend"], out["limit"], out["held"]),
                         ("p", "local", 2, True))
        self.assertEqual(sorted(h["pid"] for h in out["holders"]), sorted([first.pid, second.pid]))
        self.assertTrue(all(h["token"] > 0 for h in out["holders"]))
        self.assertEqual([(w["pid"], w["name"]) for w in out["waiters"]], [(waiter.pid, "third")])
        self.release("a")
        self.release("b")
        for p in (first, second, waiter):
            self.assert_succeeds(p)
        out = json.loads(self.status("-json").stdout)
        self.assertEqual((out["held"], out["holders"], out["waiters"]), (False, [], []))

    def test_a_name_with_control_characters_is_shown_escaped(self):
        # "\udcff" reaches lock as the byte 0xff, not UTF-8: the record keeps the byte, and it is
        # shown escaped like the controls.
        holder = self.hold("-name", "evil\x1b]0;owned\x07\nname\udcff")
        r = self.status()
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertIn(r"name 'evil\x1b]0;owned\x07\nname\xff'", r.stdout)
        self.assertEqual(r.stdout.count("\n"), 2, r.stdout)
        self.assertNotIn("\x1b", r.stdout)
        self.release()
        self.assert_succeeds(holder)

    def test_json_keeps_the_exact_bytes_of_text_that_is_not_utf8(self):
        # JSON text must be UTF-8: a prefix or name that is not shows U+FFFD for the byte 0xff
        # ("\udcff" on our side), and its exact bytes are in <field>_base64 beside it.
        holder = self.hold("-name", "job \udcff", prefix="p\udcff")
        r = self.status("-json", prefix="p\udcff")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        out = json.loads(r.stdout)
        self.assertEqual((out["prefix"], base64.b64decode(out["prefix_base64"], validate=True)),
                         ("p\ufffd", b"p\xff"))
        [h] = out["holders"]
        self.assertEqual((h["name"], base64.b64decode(h["name_base64"], validate=True)),
                         ("job \ufffd", b"job \xff"))
        # Text that is UTF-8 (the host here) has no _base64 field.
        self.assertEqual(sorted(h), ["host", "name", "name_base64", "pid", "since", "token"])
        self.release()
        self.assert_succeeds(holder)

    def test_output_that_cannot_be_written_is_an_error(self):
        for args in (["-help"], ["-version"], ["-status", "p"], ["-status", "-json", "p"]):
            with self.subTest(args=args):
                with open("/dev/full", "w") as full:
                    r = subprocess.run([LOCK, *args], env=self.env, stdin=subprocess.DEVNULL,
                                       stdout=full, stderr=subprocess.PIPE, text=True,
                                       timeout=10 * SLOW)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stderr, "lock: cannot write to standard output: "
                                           "No space left on device\n")

    def test_status_takes_a_prefix_only(self):
        for args, message in ((["-status", "p", "true"], "-status takes a prefix and no child"),
                              (["-json", "p", "true"], "-json goes with -status")):
            with self.subTest(args=args):
                r = self.run_lock(*args)
                self.assertEqual((r.returncode, r.stdout), (1, ""))
                self.assertEqual(r.stderr, f"lock: {message} (see lock -help)\n")


def context_switches(pid):
    """How often the process has been woken and put to sleep so far, all its threads counted."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
    return total


class WatchTest(LockTestCase):
    """lock -status -watch on the local backend: the status now, then at every change, woken by
    the state directory's events (inotify) and not by a timer; 0 at SIGTERM, SIGINT or -timeout."""

    def test_every_change_is_shown_once_until_a_stop_signal(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(sig=sig.name):
                watch = Watch(self, "-json", "p")
                first = watch.until(lambda o: True, "the first status")
                self.assertEqual((first["prefix"], first["held"], first["holders"]), ("p", False, []))
                a, b = f"a.{sig.name}", f"b.{sig.name}"
                holder = self.hold("-n", "2", "-name", "first", gate=a)
                # (A record is written just after its file is locked: a look in between sees a
                # holder, not yet who.)
                held = watch.until(lambda o: [h["pid"] for h in o["holders"]] == [holder.pid],
                                   "the holder")
                self.assertEqual(held["holders"][0]["name"], "first")
                self.assertEqual((held["held"], held["limit"]), (True, 2))
                second = self.hold("-n", "2", gate=b)
                waiter = self.start_lock("-n", "2", "-name", "third", "p", "true")
                out = watch.until(lambda o: len(o["holders"]) == 2 and o["waiters"]
                                  and o["waiters"][0]["name"] == "third", "the waiter")
                self.assertEqual(out["waiters"][0]["pid"], waiter.pid)
                self.release(a)
                self.assert_succeeds(holder)
                self.release(b)
                self.assert_succeeds(second)
                self.assert_succeeds(waiter)
                watch.until(lambda o: not o["held"] and not o["waiters"], "the prefix let go")
                self.assertEqual(watch.stop(sig), (0, "", ""))
                # Only changes: no line repeats the one before it.
                objects = [json.loads(line) for line in watch.seen]
                self.assertTrue(all(x != y for x, y in zip(objects, objects[1:])), watch.seen)

    def test_a_burst_of_changes_prints_as_a_few_states_ending_with_the_settled_one(self):
        """Four loops of 50 runs each on the prefix, at once: each run is a holder come and gone,
        or a waiter queued and served, changes the watch hears one by one. It prints a few states,
        the last of them the one the burst settled in. A change after that is printed at once."""
        loops, runs = 4, 50
        watch = Watch(self, "-json", "p")
        watch.until(lambda o: not o["held"], "the first status")
        started = time.monotonic()
        env = dict(self.env, LOCK=LOCK, P="p", CHILD="true")
        procs = [subprocess.Popen(["/bin/sh", "-c", lock_loop(runs, "-shell=false")], env=env, text=True,
                                  stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
                 for _ in range(loops)]
        self.procs += procs
        for p in procs:
            self.assertEqual((p.communicate(timeout=120 * SLOW)[1], p.returncode), ("", 0))
        holder = self.hold("-name", "settled")
        changes = 2 * loops * runs  # at least
        states = watch.states_until(lambda o: [h["name"] for h in o["holders"]] == ["settled"],
                                    "the settled state", most=most_states(changes))
        assert_coalesced(self, states, time.monotonic() - started)
        changed = self.release()
        self.assertEqual(json.loads(watch.next())["held"], False)  # the next line: nothing in between
        self.assertLess(time.monotonic() - changed, 1.0 * SLOW)
        self.assert_succeeds(holder)
        self.assertEqual(watch.stop(), (0, "", ""))

    def test_a_holder_killed_with_its_tree_is_seen_gone(self):
        watch = Watch(self, "-json", "p")
        watch.until(lambda o: not o["held"], "the first status")
        holder = self.hold()
        watch.until(lambda o: o["held"], "the holder")
        send(holder, signal.SIGKILL)  # its watchdog stops the tree; the slot's last close shows
        watch.until(lambda o: not o["held"], "the killed holder gone")
        self.finish(holder)
        self.assertEqual(watch.stop(), (0, "", ""))

    def test_a_quiet_prefix_shows_nothing_and_is_not_looked_at(self):
        """Other prefixes' comings and goings show nothing, and a second with nothing happening
        wakes the watch no more than once or twice: it waits on events, it does not poll."""
        watch = Watch(self, "p")
        self.assertEqual(watch.next(), "prefix 'p': not held\n")
        for k in range(5):
            other = self.hold(prefix=f"other{k}", gate=f"other{k}")
            self.release(f"other{k}")
            self.assert_succeeds(other)
        woken = context_switches(watch.proc.pid)
        time.sleep(1)  # time passing, with nothing happening, is what is under test
        self.assertLess(context_switches(watch.proc.pid) - woken, 3)
        self.assertTrue(watch.quiet(), watch.seen)
        holder = self.hold()
        self.assertRegex(watch.next(), r"^prefix 'p': held \(lock\)\n")
        self.assertRegex(watch.next(), rf"^  holder: pid {holder.pid} on ")
        self.release()
        self.assert_succeeds(holder)
        self.assertEqual(watch.next(), "prefix 'p': not held\n")
        self.assertEqual(watch.stop(), (0, "", ""))

    def test_timeout_ends_the_watch_with_0(self):
        started = time.monotonic()
        r = self.run_lock("-status", "-watch", "-timeout", "500ms", "p")
        self.assertGreaterEqual(time.monotonic() - started, 0.5)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "prefix 'p': not held\n", ""))

    def test_watch_goes_with_status(self):
        r = self.run_lock("-watch", "p", "true")
        self.assertEqual((r.returncode, r.stdout), (1, ""))
        self.assertEqual(r.stderr, "lock: -watch goes with -status (see lock -help)\n")


if __name__ == "__main__":
    unittest.main()
