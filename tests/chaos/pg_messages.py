"""What a PostgreSQL client handed its server, message by message, as the fault proxy saw it.

PostgreSQL's frontend protocol (version 3): a connection opens with messages that have no type
byte (a 4-byte big-endian length that counts itself, then a 4-byte code: SSLRequest, GSSENCRequest,
CancelRequest, or the StartupMessage of protocol 3.0, after which the session begins); every later
message is one type byte, then a 4-byte length that counts itself but not the type byte, then the
body. 'X' is Terminate: the client ends its session.

A session kept as a lease (src/backend/postgres/pg_lease.hpp) is ended by the server once it has
been idle for idle_session_timeout; each message the server reads disarms that timer, which starts
again once it has answered, so never before the message came. The harness learns from these
messages when the victim's session was last renewed, and when its client ended it.
"""

import threading

STARTUP = 3 << 16  # protocol 3.0
SPECIAL = {80877102: "cancel", 80877103: "ssl", 80877104: "gssenc"}


class PgMessages:
    """An on_upstream for FaultProxy: splits each connection's bytes into messages and keeps, for
    each one, (connection, the instant its last byte went out, its type): "startup" and the
    SPECIAL names for the untyped ones, the type letter for the others. A connection whose bytes
    make no sense is left alone from there on (its type "garbled", once)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._buffers = {}     # connection -> bytes not yet a whole message
        self._sessions = set()  # connections past their StartupMessage
        self._garbled = set()
        self._seen = []

    def __call__(self, connection, data, when):
        with self._lock:
            if connection in self._garbled:
                return
            buf = self._buffers.get(connection, b"") + bytes(data)
            while True:
                typed = connection in self._sessions
                head = 5 if typed else 8
                if len(buf) < head:
                    break
                length = int.from_bytes(buf[1:5] if typed else buf[0:4], "big")
                if length < (4 if typed else 8):
                    self._garbled.add(connection)
                    self._seen.append((connection, when, "garbled"))
                    buf = b""
                    break
                size = length + (1 if typed else 0)
                if len(buf) < size:
                    break
                if typed:
                    kind = chr(buf[0])
                else:
                    code = int.from_bytes(buf[4:8], "big")
                    kind = SPECIAL.get(code, "startup")
                    if code == STARTUP:
                        self._sessions.add(connection)
                buf = buf[size:]
                self._seen.append((connection, when, kind))
            self._buffers[connection] = buf

    def messages(self):
        """[(connection, when, type)], in the order they went out."""
        with self._lock:
            return list(self._seen)

    def clear(self):
        with self._lock:
            self._buffers.clear()
            self._sessions.clear()
            self._garbled.clear()
            self._seen.clear()


def idle_expiry(messages, ttl, spawned, start, until, windows=()):
    """The earliest instant the server could have ended the session of a client that held from
    `start` (its child's start), on the last connection that sent anything by then, as far as
    its messages by `until` tell: TTL after the last message the server read while the session
    lived, or the moment a Terminate went out, whichever is first.

    Before `start` every message counts: the client got its turn on that session, so the server
    read them all while it lived (and while it waited for the lock, it was not idle at all). From
    `start` on, a message that went out TTL or more after the one before may have found the session
    gone, and renews nothing; nor does one that went out while the server was paused (`windows`,
    (from, to) pairs), which it read later, when it may have been too late. A Terminate ends the
    session whenever the server reads it, which is not before it went out. A connection closed
    without a Terminate (a killed client, a reset) or a session the server ended itself ends
    sooner, which the messages cannot tell: the faults that do so say when (scenarios.py)."""
    ours = [m for m in messages if m[1] <= start]
    if ours:
        connection = ours[-1][0]
        messages = [m for m in messages if m[0] == connection]
    bound = spawned + ttl
    for _, at, kind in messages:
        if at > until:
            break
        if kind == "X":
            return min(bound, at)
        if at > start:
            if at >= bound:
                break  # it may have found the session gone
            if any(a <= at <= b for a, b in windows):
                continue  # read once the server went on, maybe too late
        bound = max(bound, at + ttl)
    return bound
