"""The PostgreSQL backend when things go wrong: the server ends the holder's session
(pg_terminate_backend, a restart, its idle timeout after a pause), a pooler hands statements to
another session, the server is too old, the password is wrong, nobody answers. What the child
sees (stopped, and when), how lock exits and what it says, and that no secret is ever shown."""

import json
import os
import re
import signal
import time
import unittest

from fault_proxy import FaultProxy
from harness import SLOW, free_port, pid_alive, read_file, wait_for
from pg_doubles import OldServer, TransactionPooler
from postgres_server import PostgresTestCase, SQLError, make_test_pki, missing, withlock_key

MISSING = missing()


@unittest.skipIf(MISSING, MISSING)
class PgLossTest(PostgresTestCase):
    def child_that_logs_term(self):
        return (f'trap \'date +%s.%N > {self.path("term")}; exit 0\' TERM; '
                f'echo "$LOCK_SESSION" > {self.path("session")}; while :; do sleep 0.01; done')

    def start_holder(self, *flags):
        holder = self.start_lock("-lost-exit-code", "9", *flags, self.prefix, self.child_that_logs_term())
        session = int(self.wait_file("session", "\n"))
        return holder, session

    def test_a_terminated_session_stops_the_child_at_once(self):
        """Within 250 ms of the server closing the connection (its log says when the session
        ended), the child's shell and its date(1) counted, on a loaded machine."""
        holder, session = self.start_holder()
        since = self.pg.log_size()
        self.assertTrue(self.pg.terminate(session, wait=False))
        self.wait_file("term", "\n")
        closed = self.pg.disconnected_at(session, since)
        self.assertLess(float(read_file(self.path("term"))) - closed, 0.25 * SLOW)
        code, _, err = self.finish(holder)
        self.assertEqual(code, 9, err)
        # (The shell may say "Terminated" of its sleep first.)
        self.assertRegex(err.splitlines()[-1], r"^lock: lock lost: PostgreSQL at 127\.0\.0\.1:\d+: the "
                                               r"server ended our session: terminating connection due "
                                               r"to administrator command; the child was stopped\Z")
        self.assert_nothing_left()

    def test_a_server_restart_loses_the_hold_and_the_next_token_is_higher(self):
        holder, _ = self.start_holder("-session-ttl", "2s", "-kill-after", "500ms")
        (shown,) = json.loads(self.run_lock("-status", "-json", self.prefix).stdout)["holders"]
        self.pg.restart()
        self.wait_file("term", "\n")
        code, _, err = self.finish(holder)
        self.assertEqual(code, 9, err)
        self.assertIn("lock lost: ", err)
        r = self.run_lock("-session-ttl", "2s", "-kill-after", "500ms", self.prefix, 'echo "$LOCK_FENCING_TOKEN"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertGreater(int(r.stdout), shown["token"])
        self.assert_nothing_left()

    def test_after_a_restart_a_turn_waits_out_a_holder_the_server_forgot(self):
        """A holder cut off from the server while it restarts runs its child until its
        lease-safe deadline, while the restarted server hands the lock on at once: the next
        holder starts its child only once -session-ttl has passed since the restart, after the
        first one's was stopped. The same for a crash, which recovers rather than restarts."""
        ttl = 3
        flags = ("-session-ttl", f"{ttl}s", "-kill-after", "500ms")
        for crash in (False, True):
            with self.subTest(crash=crash), FaultProxy(self.pg.host, self.pg.port) as proxy:
                for name in ("term", "session", "second"):
                    if os.path.exists(self.path(name)):
                        os.unlink(self.path(name))
                host, port = proxy.address.rsplit(":", 1)
                holder, _ = self.start_holder(*flags, "-endpoints", f"host={host} port={port}")
                proxy.set_mode("blackhole")
                if crash:
                    self.pg.kill()
                    self.pg.start()
                else:
                    self.pg.restart()
                second = self.run_lock(*flags, "-verbose", self.prefix,
                                       f"date +%s.%N > {self.path('second')}")
                self.assertEqual(second.returncode, 0, second.stderr)
                self.assertRegex(second.stderr, r"the server's sessions began \d+ ms ago \(a start, "
                                 r"or a recovery from a crash\); a holder it forgot may run until "
                                 r"-session-ttl after that: holding the lock, our turn begins in \d+ ms\n")
                self.assertLess(float(read_file(self.path("term"))),
                                float(read_file(self.path("second"))))
                code, _, err = self.finish(holder)
                self.assertEqual(code, 9, err)
        self.assert_nothing_left()

    def test_a_crash_of_one_server_process_makes_the_next_turn_wait_out_the_ttl(self):
        """A server process killed with SIGKILL (the OOM killer's way) makes PostgreSQL end every
        session and recover in place: the postmaster and its start time stay, and the holders it
        forgot are counted from the recovery (its statistics' reset) all the same."""
        self.addCleanup(self.pg.settle, again=True)  # for the next test
        holder, session = self.start_holder("-session-ttl", "3s", "-kill-after", "500ms")
        (started,), = self.pg.sql("SELECT pg_postmaster_start_time()::text")
        os.kill(session, signal.SIGKILL)
        self.wait_file("term", "\n")
        self.assertEqual(self.finish(holder)[0], 9)
        wait_for(lambda: self.recovered(), 30, "the server to recover")
        self.assertEqual(self.pg.sql("SELECT pg_postmaster_start_time()::text"), [(started,)])
        r = self.run_lock("-session-ttl", "3s", "-kill-after", "500ms", "-verbose", self.prefix, "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        waited = re.search(r"the server's sessions began (\d+) ms ago .*: holding the lock, our turn "
                           r"begins in (\d+) ms\n", r.stderr)
        self.assertTrue(waited, r.stderr)
        self.assertEqual(int(waited.group(1)) + int(waited.group(2)), 3000)

    def recovered(self):
        try:
            return self.pg.sql("SELECT 1", timeout=2) == [("1",)]
        except SQLError:
            return False

    def test_a_paused_holder_is_stopped_before_the_server_ends_its_session(self):
        """lock itself stopped (SIGSTOP): its watchdog kills the child at the lease-safe deadline,
        and the server ends the silent session once -session-ttl passed, which lets the next
        contender in, never before the child is dead."""
        ttl = 2
        holder = self.start_lock("-session-ttl", f"{ttl}s", "-kill-after", "500ms", self.prefix,
                                 f"trap '' TERM; echo $$ > {self.path('pid')}; while :; do sleep 0.01; done")
        child = int(self.wait_file("pid", "\n"))
        os.kill(holder.pid, signal.SIGSTOP)
        paused = time.monotonic()
        try:
            r = self.run_lock(self.prefix, "echo ran")
            took_over = time.monotonic()
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertFalse(pid_alive(child), "the child outlived the lease")
            # The session was idle since its last renewal, at most one renewal period before the
            # pause: the server ended it after the TTL, not before.
            self.assertGreater(took_over - paused, ttl - 0.5)
        finally:
            os.kill(holder.pid, signal.SIGCONT)
        code, _, err = self.finish(holder)
        self.assertEqual(code, 1, err)
        self.assert_nothing_left()

    def test_a_server_paused_within_the_budget_is_ridden_out(self):
        """A renewal the server answers late is awaited, not abandoned: abandoning it would close
        the connection, and the session and its lock with it. 2 s of a 4 s budget."""
        holder, session = self.start_holder()
        self.pg.pause()
        try:
            time.sleep(2)  # the pause's length is what is under test
        finally:
            self.pg.resume()
        wait_for(lambda: len(self.pg.sessions()) >= 1, 10, "the server to answer again")
        self.assertFalse(os.path.exists(self.path("term")))
        self.assert_running(holder)
        (held,) = [l for l in self.pg.advisory_locks() if l["granted"]]
        self.assertEqual(held["pid"], session)
        holder.terminate()
        self.wait_file("term", "\n")
        self.finish(holder)
        self.assert_nothing_left()

    def test_a_pooler_in_transaction_mode_is_refused_before_anything_is_taken(self):
        with TransactionPooler(self.pg) as pooler:
            for n in ("1", "2"):
                r = self.run_lock("-n", n, "-endpoints", pooler.conninfo(), self.prefix, "touch " + self.path("ran"))
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertRegex(r.stderr, r"goes through a pooler that hands statements to any session")
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
                self.assertFalse(os.path.exists(self.path("ran")))
                # Nothing was taken by any session, ours or the pooler's other one.
                self.assertEqual([l for l in self.pg.advisory_locks() if l["granted"]], [])
        self.assert_nothing_left()


@unittest.skipIf(MISSING, MISSING)
class PgConnectTest(PostgresTestCase):
    def env_without_pg(self):
        return {k: v for k, v in self.env.items() if not k.startswith("PG")}

    def test_a_uri_a_connection_string_a_password_file_and_a_service_each_reach_the_server(self):
        env = self.env_without_pg()
        for endpoints in (self.pg.uri(), self.pg.conninfo()):
            r = self.run_lock("-endpoints", endpoints, self.prefix, "true", env=env)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
        passfile = self.pg.write_pgpass(self.path("pgpass"))
        r = self.run_lock(self.prefix, "true", env=dict(self.env, PGPASSFILE=passfile, PGPASSWORD=""))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        with open(self.path("pg_service.conf"), "w") as f:
            f.write(f"[ops]\nhost={self.pg.host}\nport={self.pg.port}\nuser={self.pg.user}\n"
                    f"dbname={self.pg.dbname}\npassword={self.pg.password}\n")
        env = dict(self.env_without_pg(), PGSERVICEFILE=self.path("pg_service.conf"))
        r = self.run_lock("-endpoints", "service=ops", self.prefix, "true", env=env)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assert_nothing_left()

    def test_a_wrong_password_is_one_line_exit_1_and_never_shown(self):
        secret = "wrong-secret-4417"
        for args in ((self.prefix, "true"), ("-verbose", self.prefix, "true"), ("-status", self.prefix)):
            r = self.run_lock("-endpoints", self.pg.uri(password=secret), *args, env=self.env_without_pg())
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertNotIn(secret, r.stderr + r.stdout)
            self.assertRegex(r.stderr.splitlines()[-1], r"^lock: PostgreSQL at 127\.0\.0\.1:\d+: "
                                                        r".*password authentication failed")
            if args[0] == self.prefix:
                self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        # libpq quotes what it cannot read of a connection string; lock leaves the quote out.
        for endpoints in (f"password={secret} junk", f"postgresql://u:{secret}@[::1",
                          f"postgresql://u:{secret}%zz@h/db"):
            r = self.run_lock("-endpoints", endpoints, self.prefix, "true", env=self.env_without_pg())
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertRegex(r.stderr, r'^lock: PostgreSQL: [^\n]*"\.\.\."[^\n]*\n\Z')
            self.assertNotIn("secret", r.stderr)

    def test_an_unreachable_server_is_one_line_and_exit_1(self):
        port = free_port()
        started = time.monotonic()
        r = self.run_lock("-timeout", "2s", "-endpoints", f"host=127.0.0.1 port={port} password=hush",
                          self.prefix, "touch " + self.path("ran"), env=self.env_without_pg())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertLess(time.monotonic() - started, 2 + 5 * SLOW)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn(f"127.0.0.1:{port}", r.stderr)
        self.assertNotIn("hush", r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))

    def test_an_older_server_is_refused(self):
        with OldServer("13.11") as old:
            r = self.run_lock("-endpoints", old.conninfo(), self.prefix, "touch " + self.path("ran"),
                              env=self.env_without_pg())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr, f"lock: PostgreSQL at 127.0.0.1:{old.port}: PostgreSQL 13 cannot end "
                                   "an idle session by itself (idle_session_timeout came with 14): a "
                                   "stopped holder would keep the lock for good; lock needs PostgreSQL "
                                   "14 or later\n")
        self.assertFalse(os.path.exists(self.path("ran")))

    def test_a_session_level_lock_on_the_key_is_ours_alone(self):
        """The key in pg_locks is withlock's (the fixture computes it independently)."""
        holder = self.hold(prefix=self.prefix)
        self.assertEqual([l["key"] for l in self.pg.advisory_locks() if l["granted"]],
                         [withlock_key(self.prefix)])
        self.release()
        self.assert_succeeds(holder)
        self.assert_nothing_left()



@unittest.skipIf(MISSING, MISSING)
class PgTlsTest(PostgresTestCase):
    """libpq's TLS settings, as a user gives them: PGSSLMODE=verify-full with PGSSLROOTCERT, and
    sslmode in -endpoints."""

    TLS = True

    def test_verify_full_reaches_the_server_over_tls(self):
        env = dict(self.env, PGSSLMODE="verify-full", PGSSLROOTCERT=self.pg.ca)
        holder = self.start_lock(self.prefix, f'echo "$LOCK_SESSION" > {self.path("session")}; '
                                 f'while [ ! -e {self.path("release")} ]; do sleep 0.01; done', env=env)
        session = int(self.wait_file("session", "\n"))
        self.assertEqual(self.pg.sql("SELECT ssl FROM pg_stat_ssl WHERE pid = %s", session), [("t",)])
        self.release()
        self.assert_succeeds(holder)
        r = self.run_lock("-endpoints", self.pg.conninfo(sslmode="require"), self.prefix, "true",
                          env=dict(self.env, PGSSLMODE="disable"))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assert_nothing_left()

    def test_a_server_certificate_of_another_ca_is_refused_in_one_line(self):
        os.mkdir(self.path("other-ca"))
        other = make_test_pki(self.path("other-ca"), client=False)
        env = dict(self.env, PGSSLMODE="verify-full", PGSSLROOTCERT=other["ca"])
        r = self.run_lock(self.prefix, "touch " + self.path("ran"), env=env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertIn("certificate verify failed", r.stderr)
        self.assertNotIn(self.pg.password, r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))

if __name__ == "__main__":
    unittest.main()
