"""The PostgreSQL backend against a real PostgreSQL: the key withlock and plain SQL take, interop
with psql and withlock both ways, FIFO, the semaphore's slots and conflicts, -status, the shared
tests of the server backends, and nothing left behind. Its losses and connection errors are
test_postgres_faults.

Fixture: postgres_server.py (a server of our own, its sessions and advisory locks as it sees
them, and withlock, the CLI peer)."""

import contextlib
import json
import os
import re
import subprocess
import time
import unittest

from fault_proxy import FaultProxy
from health_checks import HealthChecks
from harness import (LOCK, SLOW, ArrivalOrder, Fleet, LimitConflicts, OperatorFlags, StatusWatch, ThreeSlots, lock_loop,
                     Watch, max_overlap, read_file, wait_for)
from nested_runs import NestedRuns
from notify_socket import NotifiesWhileWaiting
from pg_requests import PgRequestLog
from postgres_server import (PSQL, PostgresTestCase, missing, withlock_key, withlock_key_sql,
                             withlock_missing)

MISSING = missing()
WITHLOCK_MISSING = MISSING or withlock_missing()
LOGGED = 'echo "enter $ID" >> "$LOG"; sleep 0.005; echo "exit $ID" >> "$LOG"'
RECORD = re.compile(r"^-- lock (\{[^\n]*\})\n")


def record_of(statement):
    """The holder record a statement of lock's carries, or None."""
    m = RECORD.search(statement or "")
    return json.loads(m.group(1)) if m else None


@unittest.skipIf(MISSING, MISSING)
class PgCase(PostgresTestCase):
    def key_locks(self, prefix=None):
        """The advisory locks on the prefix's own key (a lock, a semaphore's line)."""
        key = withlock_key(prefix or self.prefix)
        return [l for l in self.pg.advisory_locks() if l["key"] == key]

    def holder_records(self):
        return [r for r in (record_of(s["query"]) for s in self.pg.sessions()) if r]

    def wait_queued(self, count, prefix=None):
        wait_for(lambda: len([l for l in self.key_locks(prefix) if not l["granted"]]) == count,
                 10, f"{count} waiting on the key")

    @contextlib.contextmanager
    def psql(self):
        """A psql session of the tests' role, fed statements one line at a time."""
        p = subprocess.Popen([PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1"], env=self.env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        self.procs.append(p)
        try:
            yield p.stdin
        finally:
            p.stdin.close()
            p.wait(timeout=10 * SLOW)


class PgLockTest(ArrivalOrder, PgCase):
    def wait_waiting(self, count):
        self.wait_queued(count)

    def test_the_lock_is_withlocks_key_held_by_the_childs_session(self):
        holder = self.hold(prefix=self.prefix,
                           before=f'echo "$LOCK_KEY $LOCK_SESSION $LOCK_FENCING_TOKEN" > {self.path("env")}; ')
        key, session, token = read_file(self.path("env")).split()
        k1, k2 = withlock_key(self.prefix)
        self.assertEqual(key, f"{k1},{k2}")
        (held,) = self.key_locks()
        self.assertEqual((held["pid"], held["granted"], held["mode"]), (int(session), True, "ExclusiveLock"))
        (record,) = self.holder_records()
        self.assertEqual((record["pid"], record["token"]), (holder.pid, int(token)))
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()

    def test_plain_sql_and_lock_exclude_each_other_both_ways(self):
        """An application's own pg_advisory_lock on the name, computed in SQL as README shows."""
        key_sql = withlock_key_sql(f"'{self.prefix}'")
        with self.psql() as session:
            session.write(f"SELECT pg_advisory_lock(k1, k2) FROM ({key_sql}) k;\n")
            session.flush()
            wait_for(lambda: any(l["granted"] for l in self.key_locks()), what="psql to hold")
            r = self.run_lock("-timeout", "500ms", self.prefix, "touch " + self.path("ran"))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertRegex(r.stderr, r"^lock: timed out waiting for prefix ")
            self.assertFalse(os.path.exists(self.path("ran")))
            status = self.run_lock("-status", self.prefix)
            self.assertRegex(status.stdout, rf"^prefix '{self.prefix}': held \(lock\)\n  holder: a holder "
                                            r"with no record of lock's \(not written yet, or another "
                                            r"program's\), name 'server process \d+, psql, from 127\.0\.0\.1'")
            session.write(f"SELECT pg_advisory_unlock(k1, k2) FROM ({key_sql}) k;\n")
            session.flush()
            wait_for(lambda: not self.key_locks(), what="psql to let go")
            self.assertEqual(self.run_lock(self.prefix, "true").returncode, 0)

        holder = self.hold(prefix=self.prefix)
        (got,), = self.pg.sql(f"SELECT pg_try_advisory_lock(k1, k2) FROM ({key_sql}) k")
        self.assertEqual(got, "f")
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()

    @unittest.skipIf(WITHLOCK_MISSING, WITHLOCK_MISSING)
    def test_withlock_and_lock_exclude_each_other_both_ways(self):
        holder = self.hold(prefix=self.prefix)
        peer = self.start_withlock(self.prefix, "touch", self.path("peer.ran"))
        self.wait_queued(1)
        self.assertFalse(os.path.exists(self.path("peer.ran")))
        self.release()
        self.assert_succeeds(holder)
        out, err = peer.communicate(timeout=20 * SLOW)
        self.assertEqual(peer.returncode, 0, err)
        self.assertTrue(os.path.exists(self.path("peer.ran")))

        peer = self.start_withlock(self.prefix, "sh", "-c", f"touch {self.path('peer.held')}; "
                                   f"while [ ! -e {self.path('go')} ]; do sleep 0.01; done")
        self.wait_file("peer.held")
        r = self.run_lock("-timeout", "300ms", self.prefix, "touch " + self.path("ran"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))
        waiter = self.start_lock(self.prefix, "touch " + self.path("ran"))
        self.wait_queued(1)
        self.release("go")
        peer.communicate(timeout=20 * SLOW)
        self.assert_succeeds(waiter)
        self.assertTrue(os.path.exists(self.path("ran")))
        self.assert_nothing_left()

    def test_the_fencing_token_rises_across_runs_and_a_restart(self):
        def token():
            r = self.run_lock(self.prefix, 'echo "$LOCK_FENCING_TOKEN"')
            self.assertEqual(r.returncode, 0, r.stderr)
            return int(r.stdout)

        tokens = [token(), token()]
        self.pg.restart()
        tokens.append(token())
        self.assertEqual(tokens, sorted(set(tokens)), tokens)
        self.assert_nothing_left()

    def test_status_shows_holder_and_waiters_with_their_records(self):
        self.assertEqual(self.run_lock("-status", self.prefix).returncode, 3)
        holder = self.hold("-name", "nightly", "-value", "v1", prefix=self.prefix)
        waiter = self.start_lock("-name", "next", self.prefix, "true")
        self.wait_queued(1)
        r = self.run_lock("-status", self.prefix)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, rf"^prefix '{self.prefix}': held \(lock\)\n"
                                   rf"  holder: pid {holder.pid} on \S+ since \S+Z, name 'nightly', "
                                   r"value 'v1', fencing token \d+\n"
                                   rf"  waiting: pid {waiter.pid} on \S+ since \S+Z, name 'next'\n\Z")
        out = json.loads(self.run_lock("-status", "-json", self.prefix).stdout)
        self.assertEqual((out["backend"], out["held"], out["limit"]), ("postgres", True, 1))
        self.assertEqual([(h["pid"], h["name"], h["value"]) for h in out["holders"]],
                         [(holder.pid, "nightly", "v1")])
        self.assertEqual([w["pid"] for w in out["waiters"]], [waiter.pid])
        self.release()
        self.assert_succeeds(holder)
        self.assert_succeeds(waiter)
        self.assert_nothing_left()

    def test_a_stop_signal_while_waiting_leaves_the_line_at_once(self):
        holder = self.hold(prefix=self.prefix)
        waiter = self.start_lock(self.prefix, "touch " + self.path("ran"))
        self.wait_queued(1)
        waiter.terminate()
        code, _, err = self.finish(waiter)
        self.assertNotEqual(code, 0, err)
        wait_for(lambda: len(self.key_locks()) == 1, 5, "the waiter to leave the line")
        self.release()
        self.assert_succeeds(holder)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.assert_nothing_left()

    def test_a_race_never_runs_two(self):
        log = self.path("log")
        rounds = 10 if SLOW == 1 else 5
        procs = [subprocess.Popen(["/bin/sh", "-c", lock_loop(rounds)], stdin=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True,
                                  env=dict(self.env, LOCK=LOCK, P=self.prefix, CHILD=LOGGED,
                                           LOG=log, ID=str(n)))
                 for n in range(6)]
        self.procs += procs
        for p in procs:
            _, err = p.communicate(timeout=120 * SLOW)
            self.assertEqual(p.returncode, 0, err)
        self.assertEqual(len(read_file(log).splitlines()), 2 * 6 * rounds)
        self.assertEqual(max_overlap(log), 1)
        self.assert_nothing_left()


class PgSemaphoreTest(ThreeSlots, LimitConflicts, PgCase):
    def test_slots_go_first_come_first_served_and_a_release_wakes_one(self):
        holders = [self.hold("-n", "2", prefix=self.prefix, gate=f"go{k}") for k in range(2)]
        log = self.path("log")
        waiters = []
        for n in range(3):
            waiters.append(self.start_lock("-n", "2", self.prefix,
                                           f'echo {n} >> {log}; while [ ! -e {self.path(f"w{n}")} ]; do sleep 0.01; done'))
            # The first in line holds the line (granted) and waits for a slot; the others queue.
            wait_for(lambda: len(self.key_locks()) == n + 1, 10, f"waiter {n} to queue")
        self.release("go0")
        self.assert_succeeds(holders[0])
        wait_for(lambda: read_file(log).split() == ["0"], 10 * SLOW, "the first waiter to run")
        self.release("go1")
        self.assert_succeeds(holders[1])
        wait_for(lambda: read_file(log).split() == ["0", "1"], 10 * SLOW, "the second waiter to run")
        self.release("w0")
        self.assert_succeeds(waiters[0])
        wait_for(lambda: read_file(log).split() == ["0", "1", "2"], 10 * SLOW, "the third to run")
        for n in (1, 2):
            self.release(f"w{n}")
            self.assert_succeeds(waiters[n])
        self.assert_nothing_left()

    def test_a_slot_whose_holder_died_without_a_word_is_taken_at_the_next_look(self):
        """A holder killed with SIGKILL sends no NOTIFY; its session ends with its connection,
        and the first in line looks again within its retry period (213 ms with these flags)."""
        flags = ("-n", "2", "-session-ttl", "3s", "-kill-after", "1s")
        keeper = self.hold(*flags, prefix=self.prefix, gate="keep")
        victim = self.hold(*flags, prefix=self.prefix, gate="never")
        waiter = self.start_lock(*flags, self.prefix, "touch " + self.path("ran"))
        wait_for(lambda: any(l["granted"] for l in self.key_locks()), 10, "the waiter to head the line")
        victim.kill()
        killed = time.monotonic()
        self.wait_file("ran")
        self.assertLess(time.monotonic() - killed, 1.0 * SLOW)
        self.finish(victim)
        self.assert_succeeds(waiter)
        self.release("keep")
        self.assert_succeeds(keeper)
        self.assert_nothing_left()


class PgNotifyTest(NotifiesWhileWaiting, PgCase):
    """systemd's notifications while waiting on PostgreSQL (the tests are NotifiesWhileWaiting's)."""

    holder_records = PgCase.holder_records


class PgFleetTest(Fleet, PgCase):
    """A fleet's cron job: N contenders queued on one prefix at once, each costing the server a
    handful of statements, however long the line: the server queues them and hands the lock
    over; a waiter's statement is in flight all along, which keeps its session alive unasked."""

    def test_statements_per_contender_do_not_grow_with_the_line(self):
        log = PgRequestLog()
        with FaultProxy(self.pg.host, self.pg.port, on_upstream=log) as proxy:
            flags = ["-endpoints", f"host={proxy.address.split(':')[0]} port={proxy.address.split(':')[1]}"]
            holder = self.hold(*flags, prefix=self.prefix)
            started = time.monotonic()
            procs = [self.start_lock(*flags, self.prefix, "true") for _ in range(self.N)]
            self.wait_queued(self.N)
            before = len(log.requests())
            time.sleep(2)  # the line waiting is what is under test
            self.assertLessEqual(len(log.requests()) - before, 2 / 0.5 + 2)
            self.release()
            self.assert_succeeds(holder)
            for p in procs:
                self.assert_succeeds(p)
            waited = time.monotonic() - started
        self.assert_nothing_left()
        n = self.N + 1
        self.assertEqual(log.connections(), n)
        # Each: its set-up, the lock, the token, the look for a semaphore's holders, the release:
        # 5; and the first holder's renewals, every 500 ms while it held.
        self.assertLessEqual(len(log.requests()), 5 * n + int(waited / 0.5) + 10, waited)


class PgStatusWatchTest(StatusWatch, PgCase):
    # The holder's record is in every statement it sends, the value with it.
    VALUE_HOLDER = r"pid \d+ on \S+ since \S+Z"

    @contextlib.contextmanager
    def proxy(self, log=None):
        """Lists the round trips: statements, and the pings that ask the server nothing."""
        log = log or PgRequestLog()
        with FaultProxy(self.pg.host, self.pg.port, on_upstream=log) as proxy:
            host, port = proxy.address.rsplit(":", 1)
            yield proxy, lambda: [sql for _, sql in log.round_trips()], ["-endpoints", f"host={host} port={port}"]

    def test_a_quiet_watch_reads_the_prefix_once_per_5_seconds(self):
        """A session that takes the key without a word (no NOTIFY: psql's, here) shows at the
        next read of the prefix's locks, within 5 quiet seconds and a renewal period; in
        between, the watch only asks the server whether it is there, with no statement."""
        log = PgRequestLog()
        with self.proxy(log) as (proxy, round_trips, via):
            watch = Watch(self, *via, self.prefix)
            self.assertEqual(watch.next(), f"prefix '{self.prefix}': not held\n")
            before, trips_before = len(log.requests()), len(round_trips())
            time.sleep(10)  # time passing, with nothing happening, is what is under test
            statements = log.requests()[before:]
            self.assertLessEqual(len(statements), 2, statements)
            self.assertGreaterEqual(len(round_trips()) - trips_before - len(statements), 10 / self.RENEW / 2)
            k1, k2 = withlock_key(self.prefix)
            # psql holds the key until its input ends.
            with subprocess.Popen([PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "-"], env=self.env,
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True) as psql:
                psql.stdin.write(f"SELECT pg_advisory_lock({k1}, {k2});\n")
                psql.stdin.flush()
                wait_for(lambda: any(l["granted"] for l in self.key_locks()), 10, "psql to hold the key")
                took = time.monotonic()
                self.assertRegex(watch.next(timeout=5 + self.RENEW + 5),
                                 rf"^prefix '{self.prefix}': held \(lock\)\n")
                self.assertLess(time.monotonic() - took, 5 + self.RENEW + 1.5 * SLOW)
            self.assertEqual(watch.stop()[0], 0)
        self.assert_nothing_left()


class PgOperatorsTest(OperatorFlags, PgCase):
    BACKEND = "postgres"

    def lose(self):
        (held,) = [l for l in self.key_locks() if l["granted"]]
        self.assertTrue(self.pg.terminate(held["pid"]))



class PgHealthChecksTest(HealthChecks, PgCase):
    BACKEND = "postgres"


class PgNestedRunsTest(NestedRuns, PgCase):
    pass

if __name__ == "__main__":
    unittest.main()
