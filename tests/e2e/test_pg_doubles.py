"""The wire-protocol doubles themselves (pg_doubles.py): the transaction pooler hands batches to
its two server sessions in turn, relays what a session sends unasked, and goes when a session
goes; the old server shows libpq the version it was given and answers no statement; both leave
nothing open behind them. psql is the client where it will do; a few lines of protocol
(WireClient) where the test must send or read what psql does not (extended-protocol batches sent
at once, a notification that arrives between statements)."""

import os
import socket
import struct
import subprocess
import threading
import unittest

from harness import SLOW, wait_for
from pg_doubles import (OldServer, TransactionPooler, message, parse_fields, startup_message,
                        _Stream)
from postgres_server import PSQL, PostgresTestCase, missing

MISSING = missing()
# The doubles are the same whichever build of lock the suite tests: the plain build's run covers it.
SANITIZED = "runs with the plain build; the doubles do not depend on lock's build" if SLOW > 1 else None
TIMEOUT = 10.0  # seconds (times SLOW) for any one answer


def psql(conninfo, *args, input=""):
    """psql with no libpq variable of the environment's and no prompt for a password."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    return subprocess.run([PSQL, "-X", "-w", "-A", "-t", conninfo, *args], env=env, text=True,
                          capture_output=True, input=input, timeout=20 * SLOW)


class WireClient:
    """A protocol 3.0 client over TCP: the startup, then raw messages and what comes back."""

    def __init__(self, port, **params):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT * SLOW)
        self.stream = _Stream(self.sock)
        self.sock.sendall(startup_message(params))
        self.parameters, self.key = {}, None
        for kind, body in self.until_ready():
            if kind == b"S":
                name, value, _ = body.split(b"\0")
                self.parameters[name.decode()] = value.decode()
            elif kind == b"K":
                self.key = struct.unpack("!ii", body)
            elif kind == b"E":
                raise AssertionError(f"startup refused: {parse_fields(body)}")

    def close(self):
        self.sock.close()

    def send(self, *messages):
        self.sock.sendall(b"".join(messages))

    def next(self):
        kind, body, _ = self.stream.next()
        return kind, body

    def until_ready(self):
        """The messages up to and including the next ReadyForQuery."""
        out = []
        while not out or out[-1][0] != b"Z":
            out.append(self.next())
        return out

    def query(self, sql):
        """A simple Query: the values of its rows (text), and its messages."""
        self.send(message(b"Q", sql.encode() + b"\0"))
        answer = self.until_ready()
        return rows(answer), answer


def rows(messages):
    out = []
    for kind, body in messages:
        if kind == b"D":
            count, = struct.unpack("!h", body[:2])
            pos, row = 2, []
            for _ in range(count):
                length, = struct.unpack("!i", body[pos:pos + 4])
                pos += 4
                row.append(None if length < 0 else body[pos:pos + length].decode())
                pos += max(length, 0)
            out.append(tuple(row))
    return out


def errors(messages):
    return [parse_fields(body) for kind, body in messages if kind == b"E"]


def extended(sql, *params, statement=b""):
    """Parse (unless `sql` is None: a Bind of `statement`), Bind, Describe, Execute, Sync."""
    out = []
    if sql is not None:
        out.append(message(b"P", statement + b"\0" + sql.encode() + b"\0" + struct.pack("!h", 0)))
    values = b"".join(struct.pack("!i", len(p.encode())) + p.encode() for p in params)
    out += [message(b"B", b"\0" + statement + b"\0" + struct.pack("!h", 0) +
                    struct.pack("!h", len(params)) + values + struct.pack("!h", 0)),
            message(b"D", b"P\0"), message(b"E", b"\0" + struct.pack("!i", 0)), message(b"S")]
    return b"".join(out)


def double_threads():
    return [t for t in threading.enumerate() if t.name.startswith(("pooler-", "old-server-"))]


@unittest.skipIf(MISSING, MISSING)
@unittest.skipIf(SANITIZED, SANITIZED)
class TransactionPoolerTest(PostgresTestCase):
    SETTLE = False  # no lock runs here

    def setUp(self):
        super().setUp()
        self.pooler = TransactionPooler(self.pg).__enter__()
        self.addCleanup(self.pooler.__exit__, None, None, None)

    def client(self, **params):
        params = {"user": self.pg.user, "database": self.pg.dbname, **params}
        c = WireClient(self.pooler.port, **params)
        self.addCleanup(c.close)
        return c

    def test_statements_alternate_between_two_server_sessions(self):
        # Any password will do: the pooler lets the client in itself.
        r = psql(self.pooler.conninfo(password="not checked", application_name="alternating"),
                 "-c", "SELECT pg_backend_pid()", "-c", "SELECT pg_backend_pid()",
                 "-c", "BEGIN", "-c", "SELECT pg_backend_pid(), current_setting('application_name')",
                 "-c", "COMMIT")
        self.assertEqual(r.returncode, 0, r.stderr)
        first, second = self.pooler.backend_pids()
        self.assertNotEqual(first, second)
        self.assertEqual(r.stdout.split("\n"),
                         [str(first), str(second), "BEGIN", f"{second}|alternating", "COMMIT", ""])
        self.assertEqual(self.pooler.batches(),
                         [(first, "SELECT pg_backend_pid()"), (second, "SELECT pg_backend_pid()"),
                          (first, "BEGIN"),
                          (second, "SELECT pg_backend_pid(), current_setting('application_name')"),
                          (first, "COMMIT")])
        self.assertEqual(self.pooler.startups[0]["application_name"], "alternating")
        self.assert_nothing_left()  # psql's Terminate closed both

    def test_the_startup_is_the_first_sessions(self):
        c = self.client(application_name="startup")
        self.assertEqual(c.parameters["server_version"], self.pg.sql("SHOW server_version")[0][0])
        self.assertEqual(c.parameters["application_name"], "startup")
        self.assertEqual(c.parameters["session_authorization"], self.pg.user)
        self.assertNotIn(c.key[0], self.pooler.backend_pids())
        sessions = self.sessions_since_setup()
        self.assertEqual([s["pid"] for s in sessions], self.pooler.backend_pids())
        self.assertEqual({(s["usename"], s["application_name"], s["client_addr"]) for s in sessions},
                         {(self.pg.user, "startup", None)})  # over the unix socket

    def test_extended_protocol_batches_end_at_sync(self):
        c = self.client()
        # Three batches sent at once: the second waits for the first's ReadyForQuery, and its
        # named statement does not exist in the session the third goes to.
        c.send(extended("SELECT pg_backend_pid(), $1::int + 1", "41"),
               extended("SELECT pg_backend_pid()", statement=b"named"),
               extended(None, statement=b"named"))
        first, second, third = c.until_ready(), c.until_ready(), c.until_ready()
        pids = self.pooler.backend_pids()
        self.assertEqual(rows(first), [(str(pids[0]), "42")])
        self.assertEqual(rows(second), [(str(pids[1]),)])
        self.assertEqual([e["C"] for e in errors(third)], ["26000"])  # no such prepared statement
        self.assertEqual([pid for pid, _ in self.pooler.batches()], [pids[0], pids[1], pids[0]])

    def test_a_notification_in_the_same_session(self):
        # Statements 1 and 3 run in the same session: the NOTIFY's answer carries it.
        r = psql(self.pooler.conninfo(), "-c", "LISTEN here", "-c", "SELECT 1",
                 "-c", "NOTIFY here, 'hello'")
        self.assertEqual(r.returncode, 0, r.stderr)
        listener = self.pooler.backend_pids()[0]
        self.assertIn(f'Asynchronous notification "here" with payload "hello" received from '
                      f"server process with PID {listener}.", r.stdout)

    def test_what_a_session_sends_unasked_is_relayed(self):
        c = self.client()
        c.query("LISTEN there")
        [(notifier, _)] = self.pg.sql("SELECT pg_backend_pid(), pg_notify('there', 'from outside')")
        kind, body = c.next()  # nothing asked for: it comes on its own
        self.assertEqual(kind, b"A")
        pid, = struct.unpack("!i", body[:4])
        self.assertEqual((pid, body[4:]), (int(notifier), b"there\0from outside\0"))

    def test_a_session_that_ends_ends_the_client(self):
        c = self.client()
        c.query("SELECT 1")
        self.assertTrue(self.pg.terminate(self.pooler.backend_pids()[1]))
        kind, body = c.next()
        self.assertEqual((kind, parse_fields(body)["C"]), (b"E", "57P01"))  # admin shutdown
        with self.assertRaises(EOFError):
            c.next()
        self.assert_nothing_left()  # the other session went too

    def test_an_idle_session_timeout_reaches_the_client(self):
        c = self.client()
        _, answer = c.query("SET idle_session_timeout = '100ms'")
        self.assertEqual(errors(answer), [])
        kind, body = c.next()
        self.assertEqual((kind, parse_fields(body)["C"]), (b"E", "57P05"))
        with self.assertRaises(EOFError):
            c.next()
        self.assert_nothing_left()

    def test_a_cancel_reaches_the_statement_in_flight(self):
        c = self.client()
        c.query("SELECT 1")  # so that the next goes to the second session
        c.send(message(b"Q", b"SELECT pg_sleep(60)\0"))
        sleeper = self.pooler.backend_pids()[1]
        wait_for(lambda: any(s["pid"] == sleeper and s["state"] == "active"
                             for s in self.sessions_since_setup()), TIMEOUT, "the sleep")
        with socket.create_connection(("127.0.0.1", self.pooler.port), timeout=TIMEOUT * SLOW) as s:
            s.sendall(struct.pack("!iiii", 16, 80877102, *c.key))
            self.assertEqual(s.recv(1), b"")  # closed once it was passed on
        answer = c.until_ready()
        self.assertEqual([e["C"] for e in errors(answer)], ["57014"])  # query_canceled

    def test_copy_from_stdin_goes_to_the_statement_in_flight(self):
        # The temporary table is the first session's, and so are statements 1, 3 and 5.
        r = psql(self.pooler.conninfo(), "-c", "CREATE TEMP TABLE t (v int)", "-c", "SELECT 1",
                 "-c", "COPY t FROM STDIN", "-c", "SELECT 2", "-c", "SELECT sum(v) FROM t",
                 input="5\n37\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split("\n"), ["CREATE TABLE", "1", "COPY 2", "2", "42", ""])
        first, second = self.pooler.backend_pids()
        self.assertEqual([pid for pid, _ in self.pooler.batches()],
                         [first, second, first, second, first])

    def test_a_refused_session_is_the_clients_error(self):
        r = psql(self.pooler.conninfo(dbname="no_such_db"), "-c", "SELECT 1")
        self.assertEqual(r.returncode, 2)
        self.assertIn('FATAL:  database "no_such_db" does not exist', r.stderr)

    def test_leaving_closes_everything(self):
        c = self.client()
        c.query("SELECT 1")
        self.assertEqual(len(self.sessions_since_setup()), 2)
        self.pooler.__exit__(None, None, None)
        with self.assertRaises(EOFError):
            c.next()
        self.assertEqual(double_threads(), [])
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", self.pooler.port), timeout=TIMEOUT).close()
        self.assert_nothing_left()


@unittest.skipIf(MISSING, MISSING)
@unittest.skipIf(SANITIZED, SANITIZED)
class OldServerTest(unittest.TestCase):
    def test_libpq_sees_its_version_and_no_statement_is_answered(self):
        with OldServer("13.11") as old:
            r = psql(old.conninfo(user="someone", dbname="anything"),
                     "-c", r"\echo :SERVER_VERSION_NUM :SERVER_VERSION_NAME",
                     "-c", "SHOW server_version")
            self.assertEqual(r.returncode, 1)
            self.assertEqual(r.stdout, "130011 13.11\n")  # PQserverVersion, before any statement
            self.assertEqual(r.stderr, f"ERROR:  {OldServer.MESSAGE}\n")
            self.assertEqual(old.queries, ["SHOW server_version"])
            # No password was asked for, and none is in the startup.
            [startup] = old.startups
            self.assertEqual((startup["user"], startup["database"]), ("someone", "anything"))
            self.assertNotIn("password", startup)

        with OldServer("9.6.24") as old:
            r = psql(old.conninfo(), "-c", r"\echo :SERVER_VERSION_NUM")
            self.assertEqual((r.returncode, r.stdout), (0, "90624\n"), r.stderr)

    def test_extended_protocol_gets_one_error_per_batch(self):
        with OldServer() as old:
            c = WireClient(old.port, user="someone", database="anything")
            self.addCleanup(c.close)
            self.assertEqual(c.parameters["server_version"], "13.11")
            c.send(extended("SELECT $1::int", "1"), extended("SELECT 2"))
            for _ in range(2):
                answer = c.until_ready()
                self.assertEqual([kind for kind, _ in answer], [b"E", b"Z"])
                self.assertEqual([e["C"] for e in errors(answer)], ["0A000"])
            self.assertEqual(old.queries, ["SELECT $1::int", "SELECT 2"])
            c.send(message(b"X"))
            with self.assertRaises(EOFError):
                c.next()

    def test_leaving_closes_everything(self):
        old = OldServer().__enter__()
        c = WireClient(old.port, user="someone")
        self.addCleanup(c.close)
        old.__exit__(None, None, None)
        with self.assertRaises(EOFError):
            c.next()
        self.assertEqual(double_threads(), [])
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", old.port), timeout=TIMEOUT).close()


if __name__ == "__main__":
    unittest.main()
