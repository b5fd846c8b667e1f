"""What a client asked a PostgreSQL server, read from the bytes a FaultProxy forwards upstream
(fault_proxy.py's on_upstream): PgRequestLog counts the statements of each connection, and the
round trips that ask nothing (a Sync alone, which the server answers that it is ready).

The wire protocol (PostgreSQL's "Message Flow"): a connection opens with a message without a type
byte (an SSLRequest, a GSSENCRequest or the StartupMessage: a 4-byte length, then a 4-byte code),
then typed messages: a type byte and a 4-byte length that counts itself. A statement is a simple
Query ('Q'), or an extended one ending with a Sync ('S'): one of either is one round trip. A Sync
with no Parse before it is a round trip without a statement (PING below). The password messages
('p') and Terminate ('X') are not statements.
"""

import collections
import struct
import threading

# The codes of the untyped messages a client may open with before its StartupMessage.
_PRE_STARTUP = {80877103, 80877104}  # SSLRequest, GSSENCRequest
PING = None  # what the log says for a Sync that ended no statement


class _Stream:
    def __init__(self):
        self.buf = b""
        self.started = False
        self.sql = None  # the Parse of a statement whose Sync has not come yet

    def feed(self, data):
        """The statements (their SQL, as far as the Query or Parse message gives it) and the pings
        (PING) that `data` completes."""
        self.buf += data
        out = []
        while True:
            if not self.started:
                if len(self.buf) < 8:
                    return out
                length, code = struct.unpack("!II", self.buf[:8])
                if len(self.buf) < length:
                    return out
                self.buf = self.buf[length:]
                self.started = code not in _PRE_STARTUP
                continue
            if len(self.buf) < 5:
                return out
            kind, length = self.buf[:1], struct.unpack("!I", self.buf[1:5])[0]
            if len(self.buf) < 1 + length:
                return out
            body, self.buf = self.buf[5:1 + length], self.buf[1 + length:]
            if kind == b"Q":
                out.append(body.rstrip(b"\0").decode(errors="replace"))
            elif kind == b"P":  # Parse: name\0 query\0 ...
                self.sql = body.split(b"\0")[1].decode(errors="replace")
            elif kind == b"S":
                out.append(self.sql)
                self.sql = None


class PgRequestLog:
    """An on_upstream for PostgreSQL servers: the statements the server was handed, in order,
    each as (connection, SQL), the connection being the proxy's number for it; round_trips()
    also has the pings, as (connection, PING)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._streams = collections.defaultdict(_Stream)
        self._seen = []

    def __call__(self, connection, data, when):
        with self._lock:
            for sql in self._streams[connection].feed(data):
                self._seen.append((connection, sql))

    def requests(self):
        with self._lock:
            return [(c, sql) for c, sql in self._seen if sql is not PING]

    def round_trips(self):
        with self._lock:
            return list(self._seen)

    def connections(self):
        with self._lock:
            return len(self._streams)
