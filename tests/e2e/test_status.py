"""lock -status: who holds a prefix and who waits, for people and (with -json) for scripts; the
exit status says whether the prefix is held."""

import base64
import json
import os
import socket
import subprocess
import unittest

from harness import LOCK, SLOW, LockTestCase, wait_for


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


if __name__ == "__main__":
    unittest.main()
