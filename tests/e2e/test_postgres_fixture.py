"""The PostgreSQL fixture itself (postgres_server.py): a real server run by an unprivileged user on
loopback only, password authentication, the admin helpers, restart, pause and resume, nothing
left behind, and withlock (npm advisory-lock) holding its lock under the key the module's
docstring derives."""

import os
import pwd
import shutil
import subprocess
import sys
import unittest

from harness import SLOW, pid_alive, proc_stat, read_file, wait_for
from postgres_server import (PSQL, PostgresServer, PostgresTestCase, SQLError, missing,
                             withlock_key, withlock_key_sql, withlock_missing)

MISSING = missing()
# The fixture is the same whichever build of lock the suite tests: the plain build's run covers it.
SANITIZED = "runs with the plain build; the fixture does not depend on lock's build" if SLOW > 1 else None
TMP_PREFIX = "lock-postgres-"


def listeners(port):
    """The local addresses listening on `port` (TCP, IPv4 and IPv6), as /proc/net shows them."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = read_file(table).splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, p = local.rsplit(":", 1)
            if state == "0A" and int(p, 16) == port:  # 0A: LISTEN
                found.append(address)
    return found


def uid_of(pid):
    for line in read_file(f"/proc/{pid}/status").splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return None


def gone(processes):
    """Whether none of (pid, start time) is still that process, alive."""
    return not any(pid_alive(pid) and (proc_stat(pid) or [None] * 20)[19] == started
                   for pid, started in processes)


@unittest.skipIf(MISSING, MISSING)
@unittest.skipIf(SANITIZED, SANITIZED)
class PostgresFixtureTest(PostgresTestCase):
    SETTLE = False  # no lock runs here

    def psql(self, *args, env=None, timeout=20):
        """psql as a user would run it, with the test's environment (PGHOST, ...)."""
        return subprocess.run([PSQL, "-X", "-A", "-t", *args], env=env or self.env, text=True,
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=timeout * SLOW)

    def test_runs_as_an_unprivileged_user_on_loopback_only(self):
        user = os.getuid() if os.geteuid() else pwd.getpwnam("nobody").pw_uid
        processes = self.pg.processes()
        self.assertGreater(len(processes), 1)  # the postmaster and its helpers
        self.assertEqual({uid_of(pid) for pid, _ in processes}, {user})
        self.assertEqual(listeners(self.pg.port), ["0100007F"])  # 127.0.0.1, nothing else
        info = os.stat(self.pg.dir)
        self.assertEqual((info.st_uid, info.st_mode & 0o777), (user, 0o700))
        self.assertEqual(self.pg.sql("SHOW max_connections"), [("300",)])

    def test_a_password_is_needed_and_checked(self):
        r = self.psql("-c", "SELECT current_user, current_database()")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "lock_user|lock_db\n", ""))
        for how in (self.pg.conninfo(), self.pg.uri()):
            r = self.psql(how, "-c", "SELECT 1", env=self.pg.env(self.env, password=False))
            self.assertEqual((r.returncode, r.stdout), (0, "1\n"), r.stderr)

        r = self.psql("-c", "SELECT 1", env=dict(self.env, PGPASSWORD="wrong"))
        self.assertEqual(r.returncode, 2)
        self.assertIn('password authentication failed for user "lock_user"', r.stderr)
        r = self.psql(self.pg.uri(password="wrong"), "-c", "SELECT 1")
        self.assertIn("password authentication failed", r.stderr)

        without = self.pg.env(self.env, password=False)
        r = self.psql("-w", "-c", "SELECT 1", env=without)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no password supplied", r.stderr)
        self.assertNotIn(self.pg.password, self.pg.conninfo(password=False) + self.pg.uri(password=False))

        pgpass = self.pg.write_pgpass(self.path("pgpass"))
        self.assertEqual(os.stat(pgpass).st_mode & 0o777, 0o600)
        r = self.psql("-w", "-c", "SELECT 1", env=dict(without, PGPASSFILE=pgpass))
        self.assertEqual((r.returncode, r.stdout), (0, "1\n"), r.stderr)

        # A role of a test's own: it logs in with its password, and may not create tables.
        self.pg.add_role("reader", "its secret")
        r = self.psql(self.pg.conninfo(user="reader", password="its secret"), "-c", "CREATE TABLE t (v int)")
        self.assertIn("permission denied for schema public", r.stderr)

        # The superuser has no password: it cannot log in over TCP at all.
        r = self.psql("-c", "SELECT 1", env=dict(self.env, PGUSER="postgres"))
        self.assertIn('password authentication failed for user "postgres"', r.stderr)

    def test_sql(self):
        odd = "it's\n50%s; \\ \"quoted\""
        self.assertEqual(self.pg.sql("SELECT %s, %s, %s::int + 1, 7 %% 4, ''", odd, None, 41),
                         [(odd, None, "42", "3", "")])
        self.assertEqual(self.pg.sql("SELECT x FROM generate_series(1, 3) x"), [("1",), ("2",), ("3",)])
        self.assertEqual(self.pg.sql("SELECT 1 WHERE false"), [])
        with self.assertRaises(ValueError):
            self.pg.sql("SELECT %s, %s", 1)
        with self.assertRaises(SQLError) as e:
            self.pg.sql("SELECT * FROM no_such_table")
        self.assertIn('relation "no_such_table" does not exist', e.exception.stderr)

    def test_sessions_advisory_locks_and_terminate(self):
        # A client that holds a lock until its stdin closes.
        client = subprocess.Popen([PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1"], text=True,
                                  env=dict(self.env, PGAPPNAME="holder"), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(client)
        client.stdin.write("SELECT pg_advisory_lock(-42), pg_advisory_lock(7, -8);\n")
        client.stdin.flush()
        locks = wait_for(lambda: len(self.pg.advisory_locks()) == 2 and self.pg.advisory_locks(),
                         what="the client's two advisory locks")
        [session] = self.sessions_since_setup()
        self.assertEqual((session["usename"], session["application_name"], session["client_addr"]),
                         ("lock_user", "holder", "127.0.0.1"))
        self.assertEqual(sorted(l["key"] for l in locks if l["objsubid"] == 1), [-42])
        self.assertEqual([l["key"] for l in locks if l["objsubid"] == 2], [(7, -8)])
        self.assertTrue(all(l["pid"] == session["pid"] and l["granted"] and l["datname"] == "lock_db"
                            and l["mode"] == "ExclusiveLock" for l in locks))

        self.assertTrue(self.pg.terminate(session["pid"]))
        self.assertEqual(self.sessions_since_setup(), [])
        self.assertEqual(self.pg.advisory_locks(), [])
        client.stdin.write("SELECT 1;\n")  # the client learns of it at its next query
        client.stdin.close()
        self.assertNotEqual(client.wait(timeout=10 * SLOW), 0)
        self.assertIn("terminat", client.stderr.read())
        client.stdout.close()
        client.stderr.close()
        self.assert_nothing_left()

    def test_restart_keeps_the_data_and_the_port(self):
        r = self.psql("-c", "CREATE TABLE kept (v text)", "-c", "INSERT INTO kept VALUES ('yes')")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.pg.sql, "DROP TABLE kept")
        port, pid = self.pg.port, self.pg.pid
        self.pg.restart()
        self.assertNotEqual(self.pg.pid, pid)
        self.assertEqual(self.pg.port, port)
        self.assertEqual(self.pg.sql("SELECT v FROM kept"), [("yes",)])
        self.pg.stop()
        self.assertFalse(self.pg.alive())
        r = self.psql("-c", "SELECT 1")
        self.assertIn("Connection refused", r.stderr)
        self.pg.start()
        self.assertEqual(self.pg.port, port)
        self.assertEqual(self.psql("-c", "SELECT v FROM kept").stdout, "yes\n")

    def test_pause_and_resume(self):
        # A session opened before the pause: its queries hang too.
        client = subprocess.Popen([PSQL, "-X", "-A", "-t", "-q"], text=True, env=self.env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(client)
        client.stdin.write("SELECT 'before';\n")
        client.stdin.flush()
        self.assertEqual(client.stdout.readline(), "before\n")

        self.pg.pause()
        self.addCleanup(self.pg.resume)
        self.assertTrue(all(proc_stat(pid)[0] == "T" for pid, _ in self.pg.processes()))
        # 2 s: the least libpq waits for a connection.
        r = self.psql("-c", "SELECT 1", env=dict(self.env, PGCONNECT_TIMEOUT="2"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("timeout expired", r.stderr)
        with self.assertRaises(SQLError):
            self.pg.sql("SELECT 1", timeout=1)
        client.stdin.write("SELECT 'during';\n")
        client.stdin.flush()

        self.pg.resume()
        self.assertEqual(client.stdout.readline(), "during\n")  # answered once resumed
        self.assertEqual(self.psql("-c", "SELECT 1", env=dict(self.env, PGCONNECT_TIMEOUT="2")).stdout, "1\n")
        client.stdin.close()
        self.assertEqual(client.wait(timeout=10 * SLOW), 0)
        client.stdout.close()
        client.stderr.close()
        self.assert_nothing_left()

    @unittest.skipIf(withlock_missing(), withlock_missing())
    def test_withlock_holds_its_key_and_a_second_one_waits(self):
        name = f"{self.prefix}/é"
        order = self.path("order")
        child = 'touch "$1.held"; while [ ! -e "$1.go" ]; do sleep 0.01; done; echo "$1" >> "$2"'
        first = self.start_withlock(name, "/bin/sh", "-c", child, "sh", self.path("first"), order)
        wait_for(lambda: os.path.exists(self.path("first.held")) or first.poll() is not None,
                 20, "the first withlock's child to start")
        self.assert_running(first)
        [held] = self.pg.advisory_locks()
        k1, k2 = withlock_key(name)
        self.assertEqual((held["objsubid"], held["key"], held["granted"]), (2, (k1, k2), True))
        self.assertEqual((held["classid"], held["objid"]), (k1 & 0xFFFFFFFF, k2 & 0xFFFFFFFF))
        self.assertEqual(self.pg.sql(withlock_key_sql("%s"), name), [(str(k1), str(k2))])
        # Anyone else who derives the key in SQL is kept out.
        self.assertEqual(self.pg.sql(f"SELECT pg_try_advisory_lock(k1, k2) FROM ({withlock_key_sql('%s')}) k",
                                     name), [("f",)])

        second = self.start_withlock(name, "/bin/sh", "-c", child, "sh", self.path("second"), order)
        waiting = wait_for(lambda: [l for l in self.pg.advisory_locks() if not l["granted"]],
                           20, "the second withlock to wait for the lock")
        self.assertEqual(waiting[0]["key"], (k1, k2))
        with open(self.path("second.go"), "w"):
            pass  # it may go once it holds, which it must not yet
        self.assertFalse(os.path.exists(self.path("second.held")))
        self.assertEqual(read_file(order), "")

        with open(self.path("first.go"), "w"):
            pass
        for p in (first, second):
            out, err = p.communicate(timeout=20 * SLOW)
            self.assertEqual((p.returncode, err), (0, ""))
            self.assertTrue(out.startswith("Lock acquired\n"), out)
        self.assertEqual(read_file(order).split(), [self.path("first"), self.path("second")])
        self.assert_nothing_left()
        self.assertEqual(self.pg.advisory_locks(), [])


@unittest.skipIf(MISSING, MISSING)
@unittest.skipIf(SANITIZED, SANITIZED)
class PostgresLifeTest(unittest.TestCase):
    def test_nothing_is_left_after_a_crash_a_pause_and_the_exit(self):
        with PostgresServer() as pg:
            pg.sql("CREATE TABLE t (v int)")
            pg.sql("INSERT INTO t VALUES (1)")
            crashed = pg.processes()
            pg.kill()
            self.assertTrue(gone(crashed))
            pg.start()  # crash recovery
            self.assertEqual(pg.sql("SELECT v FROM t"), [("1",)])
            processes, directory = pg.processes(), pg.dir
            pg.pause()
        self.assertTrue(gone(processes), processes)
        self.assertFalse(os.path.exists(directory))

    def test_the_server_dies_with_the_test_process(self):
        """A test process that is killed (say, by a ctest timeout) takes its server with it."""
        script = ("import sys; sys.path.insert(0, sys.argv[1]); import postgres_server\n"
                  "pg = postgres_server.PostgresServer().__enter__()\n"
                  "print(pg.dir, *(f'{p}:{s}' for p, s in pg.processes()), flush=True)\n"
                  "sys.stdin.read()\n")
        test = subprocess.Popen([sys.executable, "-c", script, os.path.dirname(os.path.abspath(__file__))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            words = test.stdout.readline().split()
        finally:
            test.kill()
            test.wait()
            test.stdin.close()
            test.stdout.close()
        self.assertTrue(words, "the test process did not start a server")
        directory = words[0]
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)  # its own cleanup never ran
        self.assertTrue(os.path.basename(directory).startswith(TMP_PREFIX))
        processes = [(int(p), s) for p, s in (w.split(":") for w in words[1:])]
        self.assertGreater(len(processes), 1)
        wait_for(lambda: gone(processes), 20, "the server's processes to die with the test process")


if __name__ == "__main__":
    unittest.main()
