"""What the harness knows of a PostgreSQL victim's session without a server: the messages its
proxy handed the server (PgMessages), the idle expiry drawn from them, and which faults apply."""

import os
import struct
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "e2e")]
from pg_messages import PgMessages, idle_expiry  # noqa: E402
from scenarios import PostgresBackend, faults_for  # noqa: E402


def untyped(code, body=b""):
    return struct.pack(">ii", 8 + len(body), code) + body


def typed(kind, body=b""):
    return kind.encode() + struct.pack(">i", 4 + len(body)) + body


SSL = untyped(80877103)
STARTUP = untyped(3 << 16, b"user\0lock_user\0\0")
QUERY = typed("Q", b"SELECT pg_backend_pid()\0")
TERMINATE = typed("X")


class PgMessagesTest(unittest.TestCase):
    def test_the_opening_is_untyped_and_the_rest_typed(self):
        m = PgMessages()
        m(1, SSL, 1.0)
        m(1, STARTUP + typed("p", b"secret") + QUERY, 2.0)
        m(1, TERMINATE, 3.0)
        self.assertEqual(m.messages(), [(1, 1.0, "ssl"), (1, 2.0, "startup"), (1, 2.0, "p"),
                                        (1, 2.0, "Q"), (1, 3.0, "X")])

    def test_a_message_counts_when_its_last_byte_went_out(self):
        m = PgMessages()
        m(1, STARTUP, 1.0)
        m(1, QUERY[:1], 2.0)
        m(1, QUERY[1:7], 3.0)
        self.assertEqual(m.messages(), [(1, 1.0, "startup")])
        m(1, QUERY[7:] + TERMINATE[:2], 4.0)
        m(1, TERMINATE[2:], 5.0)
        self.assertEqual(m.messages()[1:], [(1, 4.0, "Q"), (1, 5.0, "X")])

    def test_connections_are_split_apart(self):
        m = PgMessages()
        m(1, STARTUP + QUERY[:3], 1.0)
        m(2, STARTUP, 2.0)  # a new connection starts with a startup packet of its own
        m(1, QUERY[3:], 3.0)
        self.assertEqual(m.messages(), [(1, 1.0, "startup"), (2, 2.0, "startup"), (1, 3.0, "Q")])

    def test_nonsense_is_told_once_and_left_alone(self):
        m = PgMessages()
        m(1, STARTUP + b"Q\0\0\0\1", 1.0)  # a length shorter than itself
        m(1, QUERY, 2.0)
        self.assertEqual(m.messages(), [(1, 1.0, "startup"), (1, 1.0, "garbled")])

    def test_clear_forgets_messages_and_partial_ones(self):
        m = PgMessages()
        m(1, STARTUP + QUERY[:4], 1.0)
        m.clear()
        m(1, QUERY[4:], 2.0)  # the rest of a message it forgot: no message of its own
        m(2, STARTUP, 3.0)
        self.assertEqual(m.messages(), [(2, 3.0, "startup")])


def messages(*times, connection=1):
    """The messages of one connection: a startup packet at the first time, then queries (a time
    given as (t, kind) is of that kind)."""
    out = []
    for i, t in enumerate(times):
        at, kind = t if isinstance(t, tuple) else (t, "startup" if i == 0 else "Q")
        out.append((connection, at, kind))
    return out


class IdleExpiryTest(unittest.TestCase):
    def test_the_ttl_after_the_last_message(self):
        self.assertEqual(idle_expiry(messages(1.0, 2.0, 3.0), 5.0, 0.5, 2.5, 4.0), 8.0)

    def test_a_wait_for_the_lock_longer_than_the_ttl_is_no_expiry(self):
        # Sent at 1.0, answered when the turn came, after 12 s: the session was active meanwhile,
        # and its holder started at 13.1.
        self.assertEqual(idle_expiry(messages(0.9, 1.0, 13.0, 13.05), 5.0, 0.5, 13.1, 14.0), 18.05)

    def test_a_message_after_the_expiry_renews_nothing(self):
        self.assertEqual(idle_expiry(messages(1.0, 2.0, 7.5, 8.0), 5.0, 0.5, 2.5, 9.0), 7.0)

    def test_messages_sent_while_the_server_was_paused_renew_nothing(self):
        self.assertEqual(idle_expiry(messages(1.0, 2.0, 3.0, 6.0), 5.0, 0.5, 2.5, 7.0,
                                     windows=[(2.8, 6.5)]), 7.0)

    def test_a_terminate_ends_the_session_when_it_went_out(self):
        self.assertEqual(idle_expiry(messages(1.0, 2.0, (3.0, "X")), 5.0, 0.5, 2.5, 4.0), 3.0)

    def test_what_went_out_after_the_end_of_the_hold_counts_only_when_asked(self):
        sent = messages(1.0, 2.0, 3.0, (4.0, "X"))
        self.assertEqual(idle_expiry(sent, 5.0, 0.5, 2.5, 3.5), 8.0)
        self.assertEqual(idle_expiry(sent, 5.0, 0.5, 2.5, float("inf")), 4.0)

    def test_only_the_connection_that_held_counts(self):
        # The first connection failed (and said goodbye); the second took the lock at 2.5.
        sent = messages(0.6, (0.7, "X")) + messages(1.0, 2.0, 2.4, connection=2)
        self.assertEqual(idle_expiry(sent, 5.0, 0.5, 2.5, 3.0), 7.4)

    def test_without_a_message_the_spawn_bounds_the_session(self):
        self.assertEqual(idle_expiry([], 10.0, 0.5, 1.0, 3.0), 10.5)


def backend_with(sent):
    b = PostgresBackend()
    b.messages = PgMessages()
    b.messages._seen.extend(sent)
    return b


def victim(spawned, start, end, killed_at=None):
    return types.SimpleNamespace(section=types.SimpleNamespace(spawned=spawned, start=start,
                                                               end=end, lease="4242"),
                                 killed_at=killed_at)


def run_of(windows=(), pauses=(), short=True):
    return types.SimpleNamespace(windows=list(windows), pauses=list(pauses),
                                 fault=types.SimpleNamespace(short=short))


class DeadlineTest(unittest.TestCase):
    def test_the_idle_expiry_as_of_the_childs_end(self):
        b = backend_with(messages(1.0, 2.0, 3.0, 4.0, (20.0, "X")))
        self.assertEqual(b.deadline(run_of(), victim(0.5, 2.5, 5.0)), 9.0)

    def test_a_terminate_sent_while_the_server_was_paused_ends_it_at_the_resume(self):
        b = backend_with(messages(1.0, 2.0, 3.0, (4.0, "X")))
        run = run_of(windows=[(3.5, 6.5)], pauses=[(3.5, 6.0)])
        self.assertEqual(b.deadline(run, victim(0.5, 2.5, 7.0)), 6.0)

    def test_none_once_the_lock_was_killed(self):
        b = backend_with(messages(1.0, 2.0, 3.0))
        self.assertIsNone(b.deadline(run_of(), victim(0.5, 2.5, 3.5, killed_at=3.0)))

    def test_the_session_is_the_server_process_the_section_logged(self):
        self.assertEqual(PostgresBackend().session_of(victim(0.5, 2.5, 3.5)), 4242)


class FaultsTest(unittest.TestCase):
    def test_postgres_meets_no_http_fault_and_its_own(self):
        names = [f.name for f in faults_for("postgres")]
        for name in ("kill -9 lock", "SIGSTOP lock > TTL", "SIGSTOP whole client > TTL",
                     "SIGSTOP server 2.5s", "server restart", "proxy delay 0.3s",
                     "proxy blackhole 2.5s", "proxy blackhole > TTL", "pg_terminate_backend",
                     "proxy reset, session ends", "kill -9 lock, watchdog late 1s"):
            self.assertIn(name, names)
        self.assertFalse([n for n in names if "5xx" in n or "malformed" in n or "endless" in n])
        # A reset connection is a lost session: it cannot be ridden out, nor reconnected to.
        self.assertNotIn("proxy reset 2.5s", names)
        self.assertNotIn("proxy reset > TTL", names)

    def test_the_other_backends_do_not_meet_postgres_own(self):
        for backend in ("local", "consul", "etcd", "zookeeper"):
            names = [f.name for f in faults_for(backend)]
            self.assertNotIn("pg_terminate_backend", names)
            self.assertNotIn("proxy reset, session ends", names)
        self.assertIn("proxy reset 2.5s", [f.name for f in faults_for("etcd")])


if __name__ == "__main__":
    unittest.main()
