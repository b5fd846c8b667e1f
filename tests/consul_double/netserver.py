"""Sockets of the double's API: TCP, TLS and unix listeners speaking HTTP/1.1 with keep-alive,
every open connection tracked so that faults can reach it, and the faults themselves (5xx
answers, partitions, dropped connections, a restart that keeps the state, canned, endless or
withheld replies to chosen requests, and blocking queries that do not block)."""

import email.utils
import itertools
import os
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler

import endpoints


def _timer(seconds, action):
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()


class Connection:
    _numbers = itertools.count(1)

    def __init__(self, sock):
        self.sock = sock
        self.dropped = False
        self.opened = time.monotonic()
        # Which requests came over the same connection (a client that keeps one alive).
        self.number = next(Connection._numbers)

    def drop(self):
        """Ends the connection under the peer's feet, with no answer to whatever it asked.
        socket.socket.shutdown works on the descriptor even for TLS sockets, whose own
        shutdown would first try a TLS close."""
        self.dropped = True
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass


# What a blocking query answers at once, with the real entries, under an index fault: the index
# it asked with, one less, 0, or one more (a wake-up with nothing changed).
INDEX_MODES = {
    "unchanged": lambda asked: asked,
    "backwards": lambda asked: max(asked - 1, 0),
    "zero": lambda asked: 0,
    "spurious": lambda asked: asked + 1,
}

# How much an endless reply sends at most, should its reader never give up.
ENDLESS_LIMIT = 1 << 30


class ReplyRule:
    """A canned answer for the requests that match: `method` (None for any), `path` (exact, or
    a prefix with prefix=True), `query` (a substring of the raw query, or None), for the next
    `times` matches (None: all) within `seconds` (None: no end). mode "reply" sends status,
    headers and body, `delay_seconds` after the request came (or once the fault heals);
    "endless" a 200 whose body never ends; "hang" no answer at all until the
    rule's `hang_seconds` pass (or the connection goes), then drops the connection."""

    def __init__(self, spec):
        self.method = spec.get("method")
        self.path = spec["path"]
        self.prefix = bool(spec.get("prefix"))
        self.query = spec.get("query")
        self.times = spec.get("times", 1)
        seconds = spec.get("seconds")
        self.until = None if seconds is None else time.monotonic() + float(seconds)
        self.mode = spec.get("mode", "reply")
        self.status = int(spec.get("status", 200))
        self.headers = dict(spec.get("headers") or {})
        self.body = spec.get("body", "").encode()
        self.hang_seconds = float(spec.get("hang_seconds", 3600))
        self.delay_seconds = float(spec.get("delay_seconds", 0))

    def live(self):
        return (self.times is None or self.times > 0) and (
            self.until is None or time.monotonic() < self.until)

    def matches(self, method, raw_path, raw_query):
        if self.method and self.method != method:
            return False
        if not (raw_path.startswith(self.path) if self.prefix else raw_path == self.path):
            return False
        return self.query is None or self.query in raw_query


class Faults:
    """What the API port is currently doing wrong. Times are monotonic deadlines."""

    def __init__(self):
        self._cond = threading.Condition()
        self._fail_until = 0.0
        self._fail = (500, "", {})
        self._partition_until = 0.0
        self._heals = 0
        self._rules = []
        self._index_mode = None
        self._index_until = 0.0

    def fail(self, seconds, status, body, headers=None):
        with self._cond:
            self._fail_until = time.monotonic() + seconds
            self._fail = (status, body, dict(headers or {}))

    def add_rule(self, spec):
        rule = ReplyRule(spec)
        with self._cond:
            self._rules.append(rule)

    def take_rule(self, method, raw_path, raw_query):
        """The first live rule the request matches, one of its uses spent; None if none."""
        with self._cond:
            self._rules = [r for r in self._rules if r.live()]
            for rule in self._rules:
                if rule.matches(method, raw_path, raw_query):
                    if rule.times is not None:
                        rule.times -= 1
                    return rule
            return None

    def hang(self, conn, seconds):
        """Withholds the answer for `seconds`, or until the connection goes or the fault heals."""
        with self._cond:
            deadline = time.monotonic() + seconds
            heals = self._heals
            while not conn.dropped and self._heals == heals:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)

    def set_index_mode(self, mode, seconds):
        if mode not in INDEX_MODES:
            raise ValueError(f"no index fault {mode!r}")
        with self._cond:
            self._index_mode = mode
            self._index_until = time.monotonic() + seconds

    def index_fault(self):
        """The function that makes a blocking query's index, while an index fault lasts."""
        with self._cond:
            if self._index_mode and time.monotonic() < self._index_until:
                return INDEX_MODES[self._index_mode]
            return None

    def partition(self, seconds):
        """Returns when the partition ends."""
        with self._cond:
            self._partition_until = time.monotonic() + seconds
            return self._partition_until

    def partitioned(self):
        with self._cond:
            return time.monotonic() < self._partition_until

    def clear(self):
        with self._cond:
            self._fail_until = self._partition_until = self._index_until = 0.0
            self._rules = []
            self._heals += 1
            self._cond.notify_all()

    def failure(self):
        with self._cond:
            return self._fail if time.monotonic() < self._fail_until else None

    def held_by_partition(self, conn):
        """Blocks while a partition lasts. True means the request fell into one: its connection
        must then be dropped, never answered late."""
        with self._cond:
            held = False
            while not conn.dropped:
                remaining = self._partition_until - time.monotonic()
                if remaining <= 0:
                    break
                held = True
                self._cond.wait(remaining)
            return held or conn.dropped

    def wake(self):
        with self._cond:
            self._cond.notify_all()


class Double:
    """Everything the endpoints and the control port act on."""

    def __init__(self, store, acl, datacenter, node, session_ttl_min):
        self.store = store
        self.acl = acl
        self.datacenter = datacenter
        self.node = node
        self.node_id = str(uuid.uuid5(uuid.NAMESPACE_DNS, node))
        self.session_ttl_min = session_ttl_min
        self.faults = Faults()
        self.listeners = []
        self._up = threading.Event()
        self._up.set()
        self._lock = threading.Lock()
        self._connections = set()
        self._requests = []
        self._seq = 0
        self._closed = False

    # ---- connections -------------------------------------------------------------------------

    def register(self, conn):
        with self._lock:
            self._connections.add(conn)

    def unregister(self, conn):
        with self._lock:
            self._connections.discard(conn)

    def drop_connections(self, opened_before=float("inf")):
        with self._lock:
            conns = [c for c in self._connections if c.opened < opened_before]
        for conn in conns:
            conn.drop()
        self.faults.wake()
        self.store.wake_waiters()

    def partition(self, seconds):
        """Connections are accepted and requests read, but nothing is answered; when the
        partition ends every connection open until then is dropped, so what was asked during
        it never gets a late answer."""
        until = self.faults.partition(seconds)
        _timer(seconds, lambda: self._end_partition(until))

    def _end_partition(self, until):
        # The timer may fire late on a busy machine: a connection opened after the partition
        # ended has been served and must not be dropped.
        if not self.faults.partitioned():  # not extended by a later call
            self.drop_connections(opened_before=until)

    def heal(self):
        """Ends every fault now (a partition ends as it would on its own)."""
        was_partitioned = self.faults.partitioned()
        self.faults.clear()
        if was_partitioned:
            self.drop_connections()

    def restart(self, down_seconds):
        """Like a restarted (or re-elected) server: listeners close and every connection drops;
        after down_seconds the same addresses come back with KV and sessions kept, and every
        session's TTL starts afresh as on a leader election. Returns once the API is down."""
        self._up.clear()
        self.store.lose_leader()
        for listener in self.listeners:
            listener.stop()
        self.drop_connections()
        _timer(down_seconds, self._come_back)

    def _come_back(self):
        if self._closed:
            return
        for listener in self.listeners:
            listener.start()
        self.store.elect_leader()
        self._up.set()

    def is_up(self):
        return self._up.is_set()

    def wait_up(self, timeout):
        return self._up.wait(timeout)

    # ---- observation -------------------------------------------------------------------------

    def record(self, listener, connection, method, raw_path, raw_query, headers):
        with self._lock:
            self._seq += 1
            self._requests.append({
                "seq": self._seq, "at": time.monotonic(), "listener": listener,
                "connection": connection, "method": method,
                "path": raw_path, "query": raw_query,
                "headers": {k.lower(): v for k, v in headers.items()}})

    def requests(self):
        with self._lock:
            return list(self._requests)

    def clear_requests(self):
        with self._lock:
            self._requests.clear()

    def close(self):
        self._closed = True
        for listener in self.listeners:
            listener.stop()
        self.drop_connections()
        self.store.close()


class Listener:
    """One API address. It can be stopped and started again on the same address."""

    def __init__(self, double, kind, address, tls=None):
        self.double = double
        self.kind = kind          # "http", "https" or "unix"
        self.address = address    # (host, port) or a path
        self.tls = tls
        self._sock = None
        self._thread = None

    def start(self):
        if self._sock is not None:
            return
        if self.kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if os.path.exists(self.address):
                os.unlink(self.address)
            sock.bind(self.address)
        else:
            host, port = self.address
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            # Dropped connections linger in TIME_WAIT; a restart must get its port back.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            self.address = (host, sock.getsockname()[1])
        sock.listen(128)
        self._sock = sock
        self._thread = threading.Thread(target=self._accept, args=(sock,), daemon=True)
        self._thread.start()

    def stop(self):
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in the other thread
        except OSError:
            pass
        sock.close()
        self._thread.join()
        if self.kind == "unix" and os.path.exists(self.address):
            os.unlink(self.address)

    def describe(self):
        if self.kind == "unix":
            return f"unix {self.address}"
        host, port = self.address
        return f"{self.kind} {'[' + host + ']' if ':' in host else host}:{port}"

    def _accept(self, sock):
        while True:
            try:
                client, _ = sock.accept()
            except OSError:
                return
            if client.family in (socket.AF_INET, socket.AF_INET6):
                # Consul is written in Go, whose TCP connections have Nagle's algorithm off; with
                # it on, a reply written in two pieces waits for the client's delayed ACK.
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        if self.tls is not None:
            try:
                client.settimeout(10)
                client = self.tls.wrap_socket(client, server_side=True)
                client.settimeout(None)
            except (OSError, ssl.SSLError):
                client.close()
                return
        conn = Connection(client)
        self.double.register(conn)
        try:
            ApiHandler(client, ("127.0.0.1", 0), _ConnectionContext(self, conn))
        except (OSError, ssl.SSLError):
            pass
        finally:
            self.double.unregister(conn)
            client.close()


class _ConnectionContext:
    """Stands in for BaseHTTPRequestHandler's server: what one connection's handler needs."""

    def __init__(self, listener, conn):
        self.listener = listener
        self.double = listener.double
        self.conn = conn


class ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        ctx, double = self.server, self.server.double
        body = self._read_body()
        raw_path, _, raw_query = self.path.partition("?")
        double.record(ctx.listener.kind, ctx.conn.number, self.command, raw_path, raw_query, self.headers)
        if double.faults.held_by_partition(ctx.conn):
            return self._drop()
        rule = double.faults.take_rule(self.command, raw_path, raw_query)
        if rule is not None:
            return self._answer_by(rule)
        failure = double.faults.failure()
        if failure is not None:
            response = endpoints.Response(failure[0], failure[1].encode(), failure[2])
        else:
            request = endpoints.Request(
                self.command, urllib.parse.unquote(raw_path, errors="replace"),
                urllib.parse.parse_qs(raw_query, keep_blank_values=True), self.headers, body,
                gone=lambda: ctx.conn.dropped)
            try:
                response = endpoints.handle(double, request)
            except ConnectionAbortedError:
                return self._drop()
        # An answer that became ready during a partition is lost with its connection.
        if double.faults.held_by_partition(ctx.conn):
            return self._drop()
        self._send(response)

    do_PUT = do_DELETE = do_POST = do_HEAD = do_OPTIONS = do_PATCH = do_GET

    def _answer_by(self, rule):
        conn = self.server.conn
        if rule.mode == "hang":
            self.server.double.faults.hang(conn, rule.hang_seconds)
            return self._drop()
        if rule.mode == "endless":
            self.close_connection = True
            self.send_response_only(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Consul-Index", "1")
            self.send_header("Connection", "close")
            self.end_headers()
            block = b'{"Key":"endless","Value":null},' * 2048
            sent = 0
            try:
                self.wfile.write(b"[")
                while sent < ENDLESS_LIMIT and not conn.dropped:
                    self.wfile.write(block)
                    sent += len(block)
            except OSError:
                pass
            return self._drop()
        if rule.delay_seconds:
            self.server.double.faults.hang(conn, rule.delay_seconds)
        self._send(endpoints.Response(rule.status, rule.body, rule.headers))

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _drop(self):
        self.close_connection = True
        self.server.conn.drop()

    def _send(self, response):
        self.send_response_only(response.status)
        self.send_header("Date", email.utils.formatdate(usegmt=True))
        headers = dict(response.headers)
        if response.body and "Content-Type" not in headers:
            # What Go's net/http sniffs for a plain-text error.
            headers["Content-Type"] = "text/plain; charset=utf-8"
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)
