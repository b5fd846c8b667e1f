"""Two stand-ins for what a PostgreSQL client may meet besides a plain server, speaking the wire
protocol (version 3.0) on a free loopback port, each served by daemon threads of this process.
Both are context managers; leaving one closes every socket it opened (a thread blocked on one
wakes up: the sockets are shut down first) and waits for its threads.

TransactionPooler(server): a connection pooler in transaction mode (PgBouncer's
pool_mode=transaction), made deterministic, in front of a running PostgresServer.

    with PostgresServer() as pg, TransactionPooler(pg) as pooler:
        run_lock("-endpoints", pooler.conninfo(), ...)
        pooler.backend_pids()   # the server sessions it opened, two per client

For each client it answers the startup itself: an SSLRequest or GSSENCRequest gets 'N' (no TLS),
the StartupMessage gets AuthenticationOk (no password is asked for, so any is accepted and none is
checked), the ParameterStatus messages of its first upstream session, a BackendKeyData of its own
(a made-up pid and key, as PgBouncer's) and ReadyForQuery. Behind it, it opens two server
sessions over the server's unix socket (pg_hba `local all all trust`), each with the client's
user, database, application_name and client_encoding (other startup parameters, such as
`options`, are recorded in `startups` and dropped). The client's messages then go to the server a
batch at a time: a simple Query, a FunctionCall, or the extended-protocol messages up to and
including a Sync. Batch k goes to session k % 2, whatever the client had set, prepared, locked or
begun on the other one, as a busy pool would; everything that session answers up to its
ReadyForQuery is relayed, and the next batch waits for that ReadyForQuery (messages after a Sync
are held until then; CopyData, CopyDone and CopyFail go to the session of the COPY in flight).
So `SELECT pg_backend_pid()` twice in a row names two sessions, neither of them the pid of the
BackendKeyData (PQbackendPID), and a session-level advisory lock stays in a session the client can
no longer count on reaching, until the client goes: its sessions go with it, where a real pool
would keep them open, lock and all, for its next client.

What a session sends unasked (NotificationResponse, NoticeResponse, ParameterStatus) is relayed
when no batch is in flight; a batch in flight on the other session delays it until that batch's
ReadyForQuery. So a LISTEN and a NOTIFY that both ran in session 0 deliver the notification in
the answer to the NOTIFY; a NOTIFY that ran in session 1 (or in another client) reaches the
client only once session 0 is idle and the pooler relays it, not in any particular answer. When a
session closes (after an ErrorResponse, say FATAL 57P05 of idle_session_timeout, which is
relayed), the pooler relays what that session sent and closes the client at once; a Terminate
from the client, or its closing, closes both sessions. A CancelRequest with the key the pooler
gave goes on to the session of the batch in flight (nowhere when none is).

What it saw: backend_pids() (the server sessions, two per client, in order), batches() (each
batch's session pid and SQL), startups (each client's StartupMessage parameters).

Not implemented: TLS, authentication of the client, sharing server sessions between clients (each
client has two of its own, opened at its startup and closed with it), pipelining batches to the
server (one batch in flight per client), replication connections, protocol 3.2.

OldServer(version="13.11"): a server that lets anyone in and answers no statement, to see what a
client makes of a server version it must refuse (libpq's PQserverVersion reads the
server_version ParameterStatus: "13.11" is 130011).

    with OldServer("13.11") as old:
        run_lock("-endpoints", old.conninfo(), ...)
        old.startups   # the StartupMessage parameters each client sent, as dicts
        old.queries    # the SQL of each Query and Parse it refused

An SSLRequest or GSSENCRequest gets 'N'; a StartupMessage gets AuthenticationOk (no password asked
for), ParameterStatus server_version=<version>, server_encoding, client_encoding, DateStyle,
IntervalStyle, TimeZone, integer_datetimes, standard_conforming_strings, is_superuser,
session_authorization and application_name, a BackendKeyData and ReadyForQuery('I'). Every
statement then gets an ErrorResponse (SQLSTATE 0A000, "this double answers no statement"): a
simple Query at once, followed by ReadyForQuery; extended-protocol messages once per batch, the
rest being skipped up to the Sync, which gets ReadyForQuery, as a real server skips after an
error. A CancelRequest is read and dropped; a Terminate or a closing ends the connection.

A client asking for a protocol newer than 3.0, or for protocol options (_pq_.*), gets a
NegotiateProtocolVersion from either double, as from a real server.
"""

import os
import random
import select
import socket
import struct
import threading

from postgres_server import DBNAME, USER, conninfo_quote

PROTOCOL_3_0 = 3 << 16
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
UPSTREAM_TIMEOUT = 10.0  # seconds for a server session's startup
# Startup parameters a pooled server session gets from the client's StartupMessage.
FORWARDED_PARAMETERS = ("user", "database", "application_name", "client_encoding")
# Messages that end a batch: the server answers each with ReadyForQuery.
BATCH_ENDS = (b"Q", b"S", b"F")
# A COPY FROM STDIN in flight reads these from the client until the statement ends.
COPY_IN = (b"d", b"c", b"f")


def message(kind, body=b""):
    """One protocol message: a type byte, then its length (itself included) and body."""
    return kind + struct.pack("!i", len(body) + 4) + body


def cstring(text):
    return (text if isinstance(text, bytes) else str(text).encode()) + b"\0"


def error_response(sqlstate, text, severity="ERROR"):
    body = b"".join(code + cstring(value) for code, value in
                    ((b"S", severity), (b"V", severity), (b"C", sqlstate), (b"M", text)))
    return message(b"E", body + b"\0")


def parameter_status(name, value):
    return message(b"S", cstring(name) + cstring(value))


def ready_for_query(status=b"I"):
    return message(b"Z", status)


def startup_message(params):
    body = struct.pack("!i", PROTOCOL_3_0) + b"".join(
        cstring(k) + cstring(v) for k, v in params.items()) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def parse_fields(body):
    """An ErrorResponse's or NoticeResponse's fields, as {code letter: text}."""
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[part[:1].decode()] = part[1:].decode(errors="replace")
    return fields


class _Stream:
    """Whole messages out of a socket's byte stream."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def fill(self):
        """One recv into the buffer; False at end of stream."""
        data = self.sock.recv(65536)
        self.buf += data
        return bool(data)

    def take(self, n):
        while len(self.buf) < n:
            if not self.fill():
                raise EOFError
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def startup(self):
        """A startup-phase packet (no type byte): (code, rest of the body)."""
        length, = struct.unpack("!i", self.take(4))
        if not 8 <= length <= 10000:
            raise EOFError
        body = self.take(length - 4)
        return struct.unpack("!i", body[:4])[0], body[4:]

    def parsed(self):
        """The (type, body, raw bytes) of each message whole in the buffer, taken out of it."""
        out = []
        while len(self.buf) >= 5:
            length, = struct.unpack("!i", self.buf[1:5])
            if len(self.buf) < 1 + length:
                break
            raw, self.buf = self.buf[:1 + length], self.buf[1 + length:]
            out.append((raw[:1], raw[5:], raw))
        return out

    def next(self):
        """The next message, blocking for it."""
        while True:
            got = self.parsed()
            if got:
                # parsed() took every whole message out; put back all but the first.
                self.buf = b"".join(raw for _, _, raw in got[1:]) + self.buf
                return got[0]
            if not self.fill():
                raise EOFError


def _startup_params(body):
    items = body.split(b"\0")
    params = {}
    for k, v in zip(items[0::2], items[1::2]):
        if not k:
            break
        params[k.decode(errors="replace")] = v.decode(errors="replace")
    return params


def _negotiation(code, params):
    """A NegotiateProtocolVersion for a StartupMessage asking for more than 3.0, or None."""
    options = [k for k in params if k.startswith("_pq_.")]
    if code & 0xFFFF == 0 and not options:
        return None
    return message(b"v", struct.pack("!ii", 0, len(options)) + b"".join(map(cstring, options)))


class _Listener:
    """A listening socket on 127.0.0.1 and a thread per accepted client; stop() shuts down every
    socket registered, which wakes any thread blocked on one, and waits for the threads."""

    def __init__(self, name):
        self._guard = threading.Lock()
        self._sockets = set()
        self._threads = set()
        self._stopping = False
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self._name = name
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"{name}-acceptor",
                                          daemon=True)

    def __enter__(self):
        self._acceptor.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        with self._guard:
            self._stopping = True
            sockets = list(self._sockets)
        for sock in [self._listener, *sockets]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._acceptor.is_alive():
            self._acceptor.join(10)
        with self._guard:
            threads = list(self._threads)
        for t in threads:
            t.join(10)
        self._listener.close()

    def _register(self, sock):
        """Tracks `sock` until _close; one made while stopping is shut down at once."""
        with self._guard:
            self._sockets.add(sock)
            stopping = self._stopping
        if stopping:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return sock

    def _close(self, sock):
        with self._guard:
            self._sockets.discard(sock)
        sock.close()

    def _accept_loop(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # shut down by stop()
            self._register(client)
            t = threading.Thread(target=self._run_client, args=(client,),
                                 name=f"{self._name}-client", daemon=True)
            with self._guard:
                stopping = self._stopping
                if not stopping:
                    self._threads.add(t)
            if stopping:
                self._close(client)
                continue
            t.start()

    def _run_client(self, client):
        try:
            self._serve(client, _Stream(client))
        except (OSError, EOFError, struct.error, ValueError, IndexError):
            pass  # a client gone, a stop, or bytes that are no protocol: the connection ends
        finally:
            self._close(client)
            with self._guard:
                self._threads.discard(threading.current_thread())

    def _startup(self, client, stream):
        """Answers SSLRequest and GSSENCRequest with 'N'; returns (code, params) of the
        StartupMessage, or (CANCEL_REQUEST, (pid, key))."""
        while True:
            code, rest = stream.startup()
            if code in (SSL_REQUEST, GSSENC_REQUEST):
                client.sendall(b"N")
            elif code == CANCEL_REQUEST:
                return code, struct.unpack("!ii", rest[:8])
            elif code >> 16 == 3:
                return code, _startup_params(rest)
            else:
                version = f"{code >> 16}.{code & 0xFFFF}"
                client.sendall(error_response("0A000", f"unsupported frontend protocol {version}",
                                              "FATAL"))
                raise EOFError


class _Upstream:
    """One server session of a pooled client."""

    def __init__(self, sock):
        self.sock = sock
        self.stream = _Stream(sock)
        self.parameters = []  # its ParameterStatus messages, raw, in order
        self.pid = self.key = None
        self.held = []  # raw messages to relay once no batch is in flight elsewhere


class _UpstreamRefused(Exception):
    def __init__(self, raw):
        super().__init__("the server refused the session")
        self.raw = raw  # the server's ErrorResponse, or one of ours


class TransactionPooler(_Listener):
    """See the module's docstring. Attributes: port, address ("127.0.0.1:PORT"), startups (each
    client's StartupMessage parameters, as dicts)."""

    def __init__(self, server):
        super().__init__("pooler")
        self.server = server
        self.startups = []
        self._pids = []  # upstream pids, in the order the sessions were opened
        self._batches = []  # (upstream pid, summary)
        self._clients = {}  # (pid, key) we gave -> the client's _Session

    def conninfo(self, **overrides):
        """A libpq key=value connection string to the pooler, as the server's tests' role (no
        password needed: the pooler accepts the client without one)."""
        params = {"host": "127.0.0.1", "port": self.port, "user": self.server.user,
                  "dbname": self.server.dbname}
        params.update(overrides)
        return " ".join(f"{k}={conninfo_quote(v)}" for k, v in params.items())

    def backend_pids(self):
        """The pids of the server sessions opened so far, in order (a client's two are next to
        each other: its batches 0, 2, 4... went to the first, 1, 3, 5... to the second)."""
        with self._guard:
            return list(self._pids)

    def batches(self):
        """What went to the server, batch by batch: (the session's pid, the SQL of its Query or
        Parse, or its message types when it had neither)."""
        with self._guard:
            return list(self._batches)

    def _socket_path(self):
        return os.path.join(self.server.socket_dir, f".s.PGSQL.{self.server.port}")

    def _open_upstream(self, params):
        sock = self._register(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        up = _Upstream(sock)
        try:
            sock.settimeout(UPSTREAM_TIMEOUT)
            sock.connect(self._socket_path())
            sock.sendall(startup_message(params))
            while True:
                kind, body, raw = up.stream.next()
                if kind == b"R" and struct.unpack("!i", body[:4])[0] != 0:
                    raise _UpstreamRefused(error_response(
                        "28000", "the pooler's server session asked for a password", "FATAL"))
                if kind == b"E":
                    raise _UpstreamRefused(raw)
                if kind == b"S":
                    up.parameters.append(raw)
                elif kind == b"K":
                    up.pid, up.key = struct.unpack("!ii", body[:8])
                elif kind == b"Z":
                    break
            sock.settimeout(None)
            with self._guard:
                self._pids.append(up.pid)
            return up
        except BaseException:
            self._close(sock)
            raise

    def _serve(self, client, stream):
        code, params = self._startup(client, stream)
        if code == CANCEL_REQUEST:
            self._forward_cancel(params)
            return
        with self._guard:
            self.startups.append(dict(params))
        params.setdefault("database", params.get("user", ""))
        upstream_params = {k: params[k] for k in FORWARDED_PARAMETERS if k in params}
        ups = []
        try:
            try:
                for _ in range(2):
                    ups.append(self._open_upstream(upstream_params))
            except _UpstreamRefused as e:
                client.sendall(e.raw)
                return
            except (OSError, EOFError) as e:
                client.sendall(error_response("08006", f"the pooler cannot reach the server: {e}",
                                              "FATAL"))
                return
            key = (random.randrange(1, 1 << 31), random.randrange(-(1 << 31), 1 << 31))
            session = _Session(self, client, stream, ups)
            with self._guard:
                self._clients[key] = session
            try:
                negotiation = _negotiation(code, params)
                client.sendall(message(b"R", struct.pack("!i", 0)) + (negotiation or b"") +
                               b"".join(ups[0].parameters) +
                               message(b"K", struct.pack("!ii", *key)) + ready_for_query())
                session.run()
            finally:
                with self._guard:
                    del self._clients[key]
        finally:
            for up in ups:
                try:
                    up.sock.sendall(message(b"X"))
                except OSError:
                    pass
                self._close(up.sock)

    def _forward_cancel(self, key):
        with self._guard:
            session = self._clients.get(tuple(key))
        up = session and session.in_flight()
        if up is None:
            return
        sock = self._register(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        try:
            sock.settimeout(UPSTREAM_TIMEOUT)
            sock.connect(self._socket_path())
            sock.sendall(struct.pack("!iiii", 16, CANCEL_REQUEST, up.pid, up.key))
            sock.recv(1)  # the server closes once it has read the request
        except OSError:
            pass
        finally:
            self._close(sock)

    def _log_batch(self, pid, summary):
        with self._guard:
            self._batches.append((pid, summary))


class _Session:
    """A pooled client after its startup: one select loop over the client and its two server
    sessions."""

    def __init__(self, pooler, client, stream, ups):
        self.pooler, self.client, self.stream, self.ups = pooler, client, stream, ups
        self.pending = []  # the client's messages not yet sent on
        self.batches = 0  # batches begun
        self.current = None  # the upstream of the batch in flight
        self.open = False  # the batch in flight has not had its end (Query, Sync...) yet
        self.summary = []

    def in_flight(self):
        return self.current

    def run(self):
        socks = [self.client] + [up.sock for up in self.ups]
        while True:
            readable, _, _ = select.select(socks, [], [])
            for up in self.ups:
                if up.sock in readable:
                    more = up.stream.fill()
                    self._from_upstream(up)
                    if not more:
                        # The server ended the session (its last words relayed): so ends the
                        # client's, whatever the other session was doing.
                        self._relay(up.held)
                        return
            if self.client in readable:
                if not self.stream.fill():
                    return
                for kind, body, raw in self.stream.parsed():
                    if kind == b"X":
                        return
                    self.pending.append((kind, body, raw))
                self._send_on()

    def _relay(self, raws):
        if raws:
            self.client.sendall(b"".join(raws))

    def _from_upstream(self, up):
        out = []
        for kind, _, raw in up.stream.parsed():
            if up is self.current:
                out.append(raw)
                if kind == b"Z" and not self.open:
                    self.current = None
                    self._relay(out)
                    out = []
                    for other in self.ups:
                        self._relay(other.held)
                        other.held = []
                    self._send_on()
            elif self.current is None:
                out.append(raw)
            else:
                up.held.append(raw)
        self._relay(out)

    def _send_on(self):
        """Sends the client's pending messages on, as far as the batch in flight allows."""
        while self.pending:
            kind, body, raw = self.pending[0]
            if self.current is None:
                self.current = self.ups[self.batches % 2]
                self.batches += 1
                self.open = True
                self.summary = []
            if self.open:
                self.current.sock.sendall(raw)
                self._note(kind, body)
                if kind in BATCH_ENDS:
                    self.open = False
                    self.pooler._log_batch(self.current.pid, self._summary())
            elif kind in COPY_IN:
                self.current.sock.sendall(raw)
            else:
                return  # waits for the batch in flight's ReadyForQuery
            self.pending.pop(0)

    def _note(self, kind, body):
        if kind == b"Q":
            self.summary.append(body.rstrip(b"\0").decode(errors="replace"))
        elif kind == b"P":
            self.summary.append(body.split(b"\0")[1].decode(errors="replace"))
        elif kind not in (b"S", b"H"):
            self.summary.append(kind.decode())

    def _summary(self):
        return "; ".join(self.summary) if self.summary else "Sync"


class OldServer(_Listener):
    """See the module's docstring. Attributes: port, address ("127.0.0.1:PORT"), version,
    startups (each client's StartupMessage parameters, as dicts)."""

    MESSAGE = "this double answers no statement"

    def __init__(self, version="13.11"):
        super().__init__("old-server")
        self.version = version
        self.startups = []
        self.queries = []  # the SQL of each Query and Parse received

    def conninfo(self, **overrides):
        """A libpq key=value connection string to the double (any user and database will do)."""
        params = {"host": "127.0.0.1", "port": self.port, "user": USER, "dbname": DBNAME}
        params.update(overrides)
        return " ".join(f"{k}={conninfo_quote(v)}" for k, v in params.items())

    def _serve(self, client, stream):
        code, params = self._startup(client, stream)
        if code == CANCEL_REQUEST:
            return
        with self._guard:
            self.startups.append(dict(params))
        user = params.get("user", "")
        status = {"server_version": self.version, "server_encoding": "UTF8",
                  "client_encoding": params.get("client_encoding", "UTF8"),
                  "DateStyle": "ISO, MDY", "IntervalStyle": "postgres", "TimeZone": "UTC",
                  "integer_datetimes": "on", "standard_conforming_strings": "on",
                  "is_superuser": "off", "session_authorization": user,
                  "application_name": params.get("application_name", "")}
        client.sendall(message(b"R", struct.pack("!i", 0)) + (_negotiation(code, params) or b"") +
                       b"".join(parameter_status(k, v) for k, v in status.items()) +
                       message(b"K", struct.pack("!ii", random.randrange(1, 1 << 31),
                                                 random.randrange(-(1 << 31), 1 << 31))) +
                       ready_for_query())
        refused = error_response("0A000", self.MESSAGE)
        failed = False  # an extended-protocol batch already had its error
        while True:
            kind, body, _ = stream.next()
            if kind == b"X":
                return
            if kind in (b"Q", b"P"):
                text = body.rstrip(b"\0") if kind == b"Q" else body.split(b"\0")[1]
                with self._guard:
                    self.queries.append(text.decode(errors="replace"))
            if kind in (b"Q", b"F"):
                client.sendall(refused + ready_for_query())
            elif kind == b"S":
                client.sendall(ready_for_query())
                failed = False
            elif kind == b"H":
                pass
            elif not failed:
                client.sendall(refused)
                failed = True
