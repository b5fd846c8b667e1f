"""Waiting for a held prefix: first come, first served, prompt handoff, waiters that die, timeouts,
and prefixes that do not affect each other."""

import fcntl
import os
import socket
import struct
import subprocess
import time
import unittest

from harness import SLOW, LockTestCase, proc_stat, read_file, wait_for


def switches(task):
    """How often a thread (/proc/PID/task/TID) has gone to sleep: its voluntary context switches."""
    with open(f"{task}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))


class QueueCase(LockTestCase):

    def queue_up(self, ident, *flags, prefix="p", child=None):
        """Starts a waiter whose child logs `ident` (or is `child`), and returns it once its ticket
        is in the queue."""
        before = set(self.tickets(prefix))
        waiter = self.start_lock(*flags, prefix, child or f"echo {ident} >> {self.path('order')}")
        wait_for(lambda: set(self.tickets(prefix)) - before or waiter.poll() is not None,
                 what=f"waiter {ident}'s ticket")
        if waiter.poll() is not None:
            self.fail(f"waiter {ident} ended early: {self.finish(waiter)}")
        return waiter

    def kill(self, proc):
        proc.kill()
        proc.communicate()

    def order(self):
        return read_file(self.path("order")).split()


class QueueTest(QueueCase):

    def test_waiters_run_in_arrival_order(self):
        holder = self.hold()
        waiters = [self.queue_up(i) for i in range(1, 6)]
        self.release()
        self.assert_succeeds(holder)
        for w in waiters:
            self.assert_succeeds(w)
        self.assertEqual(self.order(), ["1", "2", "3", "4", "5"])
        self.assertEqual(self.prefixes_left(), [])

    def test_freed_lock_passes_to_the_waiter_promptly(self):
        holder = self.hold()
        waiter = self.queue_up(1)
        released = self.release()
        self.wait_file("order", "1")
        handoff = time.monotonic() - released
        self.assertLess(handoff, 1.0 * SLOW)
        self.assert_succeeds(holder)
        self.assert_succeeds(waiter)

    def test_a_handoff_leaves_the_waiters_behind_the_next_in_line_asleep(self):
        # With one slot, a holder that waited keeps its ticket (renamed h.<n>) until it lets go,
        # and the one behind it waits on that ticket alone: taking over the slot wakes nobody else.
        first = self.hold(gate="first")
        held = self.path("held.second")
        second = self.queue_up(2, child=f"touch {held}; "
                               f"while [ ! -e {self.path('second')} ]; do sleep 0.01; done")
        third = self.queue_up(3)
        main_thread = f"/proc/{third.pid}/task/{third.pid}"
        wait_for(lambda: len(os.listdir(f"/proc/{third.pid}/task")) == 2
                 and proc_stat(third.pid)[0] == "S", what="the third to wait, asleep")
        before = switches(main_thread)
        self.release("first")
        wait_for(lambda: os.path.exists(held), what="the second to hold")
        files = self.prefix_files("p")
        self.assertEqual([f[:2] for f in files if f[:2] in ("h.", "q.")], ["h.", "q."], files)
        deadline = time.monotonic() + 0.5  # it would have woken within a millisecond or so
        while time.monotonic() < deadline:
            self.assertEqual(switches(main_thread), before, "the third woke at the handoff")
            time.sleep(0.01)
        self.release("second")
        for w in (first, second, third):
            self.assert_succeeds(w)
        self.assertEqual(self.order(), ["3"])
        self.assertEqual(self.prefixes_left(), [])

    def test_waiter_killed_while_waiting_does_not_block_those_behind_it(self):
        holder = self.hold()
        waiters = {i: self.queue_up(i) for i in range(1, 6)}
        # One at the head of the queue, one in the middle, and two in a row; their tickets stay
        # behind, no longer locked by anyone.
        for i in (1, 3, 4):
            self.kill(waiters[i])
        self.release()
        self.assert_succeeds(holder)
        for i in (2, 5):
            self.assert_succeeds(waiters[i])
        self.assertEqual(self.order(), ["2", "5"])
        self.assertEqual(self.prefixes_left(), [])

    def test_ticket_left_by_a_killed_waiter_does_not_block_a_newcomer(self):
        holder = self.hold()
        dead = self.queue_up("dead")
        self.kill(dead)
        self.assertEqual(len(self.tickets()), 1)
        newcomer = self.queue_up("new")
        self.release()
        self.assert_succeeds(holder)
        self.assert_succeeds(newcomer)
        self.assertEqual(self.order(), ["new"])
        self.assertEqual(self.prefixes_left(), [])

    def test_ticket_left_by_a_killed_waiter_is_cleaned_up(self):
        holder = self.hold()
        dead = self.queue_up("dead")
        self.kill(dead)
        self.assertEqual(len(self.tickets()), 1)
        self.release()
        self.assert_succeeds(holder)
        self.assertEqual(self.prefixes_left(), [])
        r = self.run_lock("-timeout", "5s", "p", f"echo new >> {self.path('order')}")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.order(), ["new"])

    def test_timeout_while_held_gives_up_and_names_the_holder(self):
        holder = self.hold()
        ran = self.path("ran")
        start = time.monotonic()
        r = self.run_lock("-timeout", "200ms", "p", f"touch {ran}")
        elapsed = time.monotonic() - start
        self.assertEqual(r.returncode, 1)
        self.assertGreaterEqual(elapsed, 0.2)
        self.assertLess(elapsed, 2.0 * SLOW)
        self.assertTrue(r.stderr.startswith(
            f"lock: timed out waiting for prefix 'p'; held by pid {holder.pid} on "
            f"{socket.gethostname()} since "), r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertFalse(os.path.exists(ran))
        self.assertEqual(self.tickets(), [])
        self.release()
        self.assert_succeeds(holder)

    def test_waiter_timing_out_in_the_queue_leaves_it_intact(self):
        holder = self.hold()
        first = self.queue_up(1)
        quitter = self.queue_up(2, "-timeout", "300ms")
        last = self.queue_up(3)
        code, _, err = self.finish(quitter)
        self.assertEqual(code, 1)
        self.assertTrue(err.startswith(
            f"lock: timed out waiting for prefix 'p'; held by pid {holder.pid} on "), err)
        self.assertEqual(len(self.tickets()), 2)
        self.release()
        for w in (holder, first, last):
            self.assert_succeeds(w)
        self.assertEqual(self.order(), ["1", "3"])
        self.assertEqual(self.prefixes_left(), [])

    def test_try_is_the_same_timeout(self):
        holder = self.hold()
        r = self.run_lock("-try", "200ms", "p", "true")
        self.assertEqual(r.returncode, 1)
        self.assertIn("timed out waiting for prefix 'p'", r.stderr)
        self.release()
        self.assert_succeeds(holder)

    def test_waiter_with_a_timeout_acquires_if_freed_in_time(self):
        holder = self.hold()
        waiter = self.queue_up(1, "-timeout", "30s")
        self.release()
        self.assert_succeeds(holder)
        self.assert_succeeds(waiter)
        self.assertEqual(self.order(), ["1"])

    def test_timeout_zero_waits_until_released(self):
        holder = self.hold()
        waiter = self.queue_up(1, "-timeout", "0")
        # Well past any short timeout it is still waiting, not failing.
        with self.assertRaises(subprocess.TimeoutExpired):
            waiter.wait(timeout=1.0)
        self.assertEqual(self.order(), [])
        self.release()
        self.assert_succeeds(holder)
        self.assert_succeeds(waiter)
        self.assertEqual(self.order(), ["1"])

    def test_other_prefixes_are_not_blocked(self):
        holder = self.hold()
        for other in ("q", "p/sub", "pp"):
            with self.subTest(prefix=other):
                r = self.run_lock("-timeout", "5s", other, f"echo {other} >> {self.path('order')}")
                self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(self.order(), ["q", "p/sub", "pp"])
        self.release()
        self.assert_succeeds(holder)

    def test_semaphore_waiter_takes_the_first_slot_freed(self):
        first = self.hold("-n", "2", gate="first")
        second = self.hold("-n", "2", gate="second")
        waiter = self.queue_up(1, "-n", "2")
        # Freeing either slot is enough: the first holder keeps its own.
        self.release("second")
        self.assert_succeeds(second)
        self.assert_succeeds(waiter)
        self.assertEqual(self.order(), ["1"])
        self.assert_running(first)
        self.release("first")
        self.assert_succeeds(first)



class StuckLockTest(QueueCase):
    """A process stopped (^Z) while it holds one of the short internal locks, the prefix's meta
    lock or the state directory's fencing counter: every wait on them still ends with -timeout
    or a stopping signal, and leaves nothing of the run that gave up."""

    def ofd_lock(self, path):
        """Holds path's lock as a stopped lock would, for the rest of the test. A running lock
        holds it only for moments, so this waits for the next of them to end."""
        fd = os.open(path, os.O_RDWR)
        self.addCleanup(os.close, fd)
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, struct.pack("hhxxxxqqixxxx", fcntl.F_WRLCK, 0, 0, 0, 0))

    def test_a_stuck_fencing_counter_ends_with_the_timeout_and_leaves_nothing(self):
        self.assertEqual(self.run_lock("other", "true").returncode, 0)  # makes the counter
        self.ofd_lock(os.path.join(self.state, "@fence"))
        ran = self.path("ran")
        start = time.monotonic()
        r = self.run_lock("-timeout", "500ms", "p", f"touch {ran}")
        elapsed = time.monotonic() - start
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr, "lock: timed out waiting for the state directory's fencing "
                         "counter (@fence), which another lock holds and does not let go (a "
                         "stopped process?)\n")
        self.assertGreaterEqual(elapsed, 0.5)
        self.assertLess(elapsed, 0.5 + 2 * SLOW)
        self.assertFalse(os.path.exists(ran))
        self.assertEqual(self.prefixes_left(), [])

    def test_a_stuck_fencing_counter_gives_way_to_sigterm(self):
        self.assertEqual(self.run_lock("other", "true").returncode, 0)
        self.ofd_lock(os.path.join(self.state, "@fence"))
        waiter = self.start_lock("p", f"touch {self.path('ran')}")
        wait_for(lambda: "slot.0" in self.prefix_files("p"), what="the run to take its slot")
        waiter.terminate()
        code, _, err = self.finish(waiter, timeout=2)
        self.assertNotEqual(code, 0, err)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assertEqual(self.prefixes_left(), [])

    def test_a_stuck_meta_lock_after_the_slot_is_won_ends_with_the_timeout(self):
        holder = self.hold()
        waiter = self.queue_up("w", "-timeout", "2s")
        self.ofd_lock(os.path.join(self.state, "p", "meta"))
        self.release()
        self.assert_succeeds(holder)
        code, _, err = self.finish(waiter, timeout=5)
        self.assertEqual(code, 1, err)
        self.assertTrue(err.startswith("lock: timed out waiting for prefix 'p'"), err)
        self.assertFalse(os.path.exists(self.path("order")))


if __name__ == "__main__":
    unittest.main()
