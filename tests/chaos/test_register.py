"""The register store over its socket, and the section (contenders.SECTION, run here without
lock) speaking its protocol: what the checker counts lost updates from must be what happened."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from contenders import PERL, SECTION, read_log  # noqa: E402
from register import RegisterStore  # noqa: E402


class RegisterStoreTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lock-chaos-register-test-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.store = RegisterStore(os.path.join(self.dir, "register"))
        self.stopped = False
        self.addCleanup(self.stop)
        self.log = os.path.join(self.dir, "log")

    def stop(self):
        if not self.stopped:
            self.stopped = True
            return self.store.stop()
        return None

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.store.path)
        answers = s.makefile("r")
        self.addCleanup(s.close)
        self.addCleanup(answers.close)
        return s, answers

    def ask(self, conn, line):
        s, answers = conn
        s.sendall(line.encode() + b"\n")
        return answers.readline().strip()

    def section(self, token, seconds=0.0, tag="c0"):
        env = dict(os.environ, LOCK_FENCING_TOKEN=str(token), LOCK_KEY="k")
        p = subprocess.Popen([PERL, "-e", SECTION, self.log, f"{seconds:.4f}", tag, "0.0",
                              self.store.path], env=env, stderr=subprocess.PIPE, text=True)
        self.addCleanup(p.stderr.close)
        return p

    def test_a_read_raises_the_fence_for_the_writes_that_follow(self):
        old, new = self.connect(), self.connect()
        self.assertEqual(self.ask(old, "R 5 100"), "0 0")
        self.assertEqual(self.ask(new, "R 6 101"), "0 0")
        self.assertEqual(self.ask(old, "W 5 100 1 1"), "refused ok")
        self.assertEqual(self.ask(new, "W 6 101 1 1"), "ok ok")
        self.assertTrue(self.store.refused(100))
        logs = self.stop()
        self.assertEqual((logs["checked"].final, logs["checked"].lost, logs["checked"].refused),
                         (1, 0, 1))
        self.assertEqual((logs["unchecked"].final, logs["unchecked"].lost), (1, 1))

    def test_the_holder_of_the_highest_token_may_write_again(self):
        conn = self.connect()
        self.ask(conn, "R 7 100")
        self.assertEqual(self.ask(conn, "W 7 100 1 1"), "ok ok")

    def test_a_malformed_request_is_answered_and_recorded(self):
        conn = self.connect()
        self.assertEqual(self.ask(conn, "W 5 x"), "error")
        self.assertEqual(self.store.errors, ["W 5 x"])

    def test_a_write_sent_just_before_the_stop_still_counts(self):
        s, _ = self.connect()
        s.sendall(b"R 5 100\nW 5 100 1 1\n")
        s.shutdown(socket.SHUT_WR)
        logs = self.stop()
        self.assertEqual((logs["checked"].final, logs["unchecked"].final), (1, 1))

    def test_sections_read_modify_write_in_turn(self):
        for token in (3, 4, 5):
            p = self.section(token)
            _, err = p.communicate(timeout=30)
            self.assertEqual((p.returncode, err), (0, ""))
        logs = self.stop()
        for name in ("checked", "unchecked"):
            self.assertEqual((logs[name].final, logs[name].acknowledged, logs[name].lost),
                             (3, 3, 0), name)
        with open(self.log) as f:
            sections, malformed = read_log(f.read())
        self.assertEqual(([s.how for s in sections], malformed), (["done"] * 3, []))
        self.assertEqual([w.pid for w in logs["checked"].writes], [s.pid for s in sections])

    def test_a_stale_section_is_refused_by_the_checked_register_only(self):
        # The old holder reads and waits; its successor reads and writes meanwhile; the old
        # holder's write then comes from a stale read.
        old = self.section(5, seconds=30, tag="victim0")
        self.addCleanup(lambda: old.poll() is None and (old.kill(), old.wait()))
        deadline = time.monotonic() + 10
        while not self.store.registers.reads and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertTrue(self.store.registers.reads, "the old holder never read")
        new = self.section(6)
        self.assertEqual(new.communicate(timeout=30), (None, ""))
        # Its helper (`sleep`) ended: the section goes straight on to its write.
        with open(self.log) as f:
            helper = next(s.helper for s in read_log(f.read())[0] if s.tag == "victim0")
        os.kill(helper, signal.SIGKILL)
        self.assertEqual((old.communicate(timeout=30), old.returncode), ((None, ""), 0))
        logs = self.stop()
        self.assertEqual((logs["checked"].final, logs["checked"].refused, logs["checked"].lost),
                         (1, 1, 0))
        self.assertEqual((logs["unchecked"].final, logs["unchecked"].lost), (1, 1))


if __name__ == "__main__":
    unittest.main()
