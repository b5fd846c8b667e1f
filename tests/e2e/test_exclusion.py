"""Mutual exclusion under contention: many processes race for one prefix, and the log their children
write shows how many of them ever held it at once."""

import os
import signal
import subprocess
import unittest

from harness import LOCK, SLOW, LockTestCase

CONTENDERS = 8
# The sanitized build looks for memory errors, which contended runs meet in the first few rounds;
# the rounds that make an overlap likely to show, should there be one, are the plain build's.
ROUNDS = 50 if SLOW == 1 else 15

# Each contender runs `lock` ROUNDS times in a row; any failing run ends it with that run's status.
CONTENDER = """
i=0
while [ $i -lt "$ROUNDS" ]; do
  "$LOCK" -n "$LIMIT" p "$CHILD" || exit $?
  i=$((i + 1))
done
"""

# One write(2) per line on an O_APPEND descriptor, so concurrent lines never interleave.
ENTER = 'echo "enter $ID" >> "$LOG"'
EXIT = 'echo "exit $ID" >> "$LOG"'


class ExclusionTest(LockTestCase):

    def race(self, limit, child):
        """Runs the contenders to the end; returns the log as (event, id) pairs."""
        log = self.path("log")
        procs = []
        for n in range(CONTENDERS):
            env = dict(self.env, LOCK=LOCK, LIMIT=str(limit), ROUNDS=str(ROUNDS), CHILD=child,
                       LOG=log, ID=str(n))
            p = subprocess.Popen(["/bin/sh", "-c", CONTENDER], env=env, stdin=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True, start_new_session=True)
            self.addCleanup(self.kill_group, p)
            procs.append(p)
        for n, p in enumerate(procs):
            _, err = p.communicate(timeout=120 * SLOW)
            self.assertEqual(p.returncode, 0, f"contender {n} failed: {err}")
        with open(log) as f:
            events = [tuple(line.split()) for line in f]
        self.assertEqual(len(events), 2 * CONTENDERS * ROUNDS)
        for event in events:
            self.assertIn(event[0], ("enter", "exit"), event)
        # The last one out removes the prefix's files, whatever order they left in.
        self.assertEqual(self.prefixes_left(), [])
        return events

    @staticmethod
    def kill_group(proc):
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def test_one_holder_at_a_time(self):
        events = self.race(1, f"{ENTER}; {EXIT}")
        for i in range(0, len(events), 2):
            enter, leave = events[i], events[i + 1]
            self.assertEqual((enter[0], leave[0]), ("enter", "exit"),
                             f"lines {i + 1}-{i + 2}: two holders at once: {enter} {leave}")
            self.assertEqual(enter[1], leave[1], f"lines {i + 1}-{i + 2}: two holders at once")

    def test_semaphore_admits_up_to_its_limit(self):
        # The first holders wait (boundedly) until three have entered, so a correct semaphore
        # reaches its limit for certain; the short pause afterwards keeps later rounds overlapping.
        linger = ('n=0; while [ "$(grep -c enter "$LOG")" -lt 3 ] && [ $n -lt 500 ]; '
                  'do sleep 0.01; n=$((n + 1)); done; sleep 0.01')
        events = self.race(3, f"{ENTER}; {linger}; {EXIT}")
        holders, most = set(), 0
        for i, (event, who) in enumerate(events):
            if event == "enter":
                self.assertNotIn(who, holders, f"line {i + 1}: entered twice")
                holders.add(who)
            else:
                self.assertIn(who, holders, f"line {i + 1}: left without entering")
                holders.remove(who)
            self.assertLessEqual(len(holders), 3, f"line {i + 1}: holders {sorted(holders)}")
            most = max(most, len(holders))
        self.assertEqual(most, 3)
        self.assertEqual(holders, set())


if __name__ == "__main__":
    unittest.main()
