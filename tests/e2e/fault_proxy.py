"""A TCP proxy for fault tests: it sits between `lock` and a server on a free loopback port and,
on command, delays, blackholes or resets the connections, or answers HTTP requests itself.

    with FaultProxy("127.0.0.1", etcd_port) as proxy:
        run_lock("-endpoints", proxy.url, ...)
        proxy.outage("http", 2.5, status=503, reason="Service Unavailable", body="{}")

Modes, set with set_mode(mode, **kw):
    pass       forward bytes both ways
    delay      seconds=: hold each chunk that long before forwarding it (replies_only=True: only
               the server's, so that the server has each request at once)
    blackhole  accept connections and keep them open, read and forward nothing (a paused server:
               what was sent waits in the kernel's buffers and flows on when the mode changes)
    reset      close existing and new connections at once with a RST
    http       answer every HTTP/1.1 request itself, keep-alive: status=, reason=, body=,
               headers={} (or raw= bytes sent as the whole reply, for replies that are not HTTP)
    endless    answer every request with 200 and a body that never ends: bytes= what to repeat,
               chunked= (default True; False sends no length at all)

The forwarding modes (pass, delay, blackhole) and the answering modes (http, endless) cannot share
a connection mid-stream, so a switch from one family to the other closes the open connections;
the client's next request meets the new mode. Each connection is served by one thread with one
select loop, so closing or resetting it never races a blocked call in another thread.

on_upstream, if given, is called as on_upstream(connection, data, when) each time bytes were
handed to the server's socket (connection: the number of the accepted connection, from 1; when:
time.monotonic() just after the write), from that connection's thread: what the server can have
read, and not before when. The chaos harness learns from it when a ZooKeeper server heard from its
client (tests/chaos/scenarios.py).
"""

import collections
import os
import select
import socket
import struct
import threading
import time

FORWARDING = ("pass", "delay", "blackhole")
ANSWERING = ("http", "endless")
MODES = FORWARDING + ANSWERING + ("reset",)

# Enough in flight to keep a stream moving, little enough that a client that stops reading stops
# the proxy from reading too (and an endless body from growing here instead of in the client).
BUFFER_LIMIT = 256 * 1024
MAX_HEADER = 64 * 1024


def _rst_close(sock):
    """Close with a RST instead of a FIN (SO_LINGER on, timeout 0)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class _Wakeup:
    """A pipe a select loop watches, so another thread can interrupt it."""

    def __init__(self):
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)
        # A poke after close must not write into a descriptor number the process has reused.
        self._guard = threading.Lock()
        self._closed = False

    def poke(self):
        with self._guard:
            if self._closed:
                return
            try:
                os.write(self.w, b"x")
            except BlockingIOError:
                pass  # already poked

    def drain(self):
        try:
            while os.read(self.r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self):
        with self._guard:
            self._closed = True
            os.close(self.r)
            os.close(self.w)


class _HttpRequests:
    """Splits a client's byte stream into complete HTTP/1.1 requests (Content-Length or chunked
    bodies); yields each request line as it completes."""

    def __init__(self):
        self.buf = b""

    def feed(self, data):
        self.buf += data
        out = []
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > MAX_HEADER:
                    raise ValueError("request header too long")
                return out
            head = self.buf[:end].decode("latin-1").split("\r\n")
            headers = {}
            for line in head[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            body_start = end + 4
            if headers.get("transfer-encoding", "").lower() == "chunked":
                consumed = self._chunked_end(body_start)
                if consumed is None:
                    return out
            else:
                consumed = body_start + int(headers.get("content-length", "0") or 0)
                if len(self.buf) < consumed:
                    return out
            self.buf = self.buf[consumed:]
            out.append(head[0])

    def _chunked_end(self, pos):
        while True:
            eol = self.buf.find(b"\r\n", pos)
            if eol < 0:
                return None
            size = int(self.buf[pos:eol].split(b";")[0] or b"0", 16)
            pos = eol + 2 + size + 2
            if len(self.buf) < pos:
                return None
            if size == 0:
                return pos  # no trailers from the clients we serve


class HttpRequestLog:
    """An on_upstream for HTTP servers: the requests the server was handed, in order, each as
    (connection, "METHOD /path"), the connection being the proxy's number for it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._streams = collections.defaultdict(_HttpRequests)
        self._seen = []

    def __call__(self, connection, data, when):
        with self._lock:
            for line in self._streams[connection].feed(data):
                method, target = line.split(" ")[:2]
                self._seen.append((connection, f"{method} {target.partition('?')[0]}"))

    def requests(self):
        with self._lock:
            return list(self._seen)


class _Connection(threading.Thread):
    """One accepted client: forwarded to the target, or answered, in one select loop."""

    def __init__(self, proxy, client):
        super().__init__(daemon=True)
        self.proxy = proxy
        self.client = client
        self.upstream = None
        self.family = "answering" if proxy.mode in ANSWERING else "forwarding"
        self.wake = _Wakeup()
        self.ending = None  # None, "close" or "reset": asked for by another thread
        # Chunks waiting for their time: (due, bytes), per direction.
        self.to_upstream = collections.deque()
        self.to_client = collections.deque()
        self.out_upstream = b""
        self.out_client = b""
        self.requests = _HttpRequests()
        self.streaming = False  # an endless body is being sent
        self.eof = False
        self.number = 0  # set by the proxy: the how-manieth accepted connection

    def end(self, how):
        self.ending = self.ending or how
        self.wake.poke()

    def run(self):
        try:
            self.client.setblocking(False)
            self._loop()
        except OSError:
            self.ending = self.ending or "close"
        finally:
            if self.ending == "reset":
                _rst_close(self.client)
            else:
                self.client.close()
            if self.upstream:
                (_rst_close if self.ending == "reset" else socket.socket.close)(self.upstream)
            self.wake.close()
            self.proxy._forget(self)

    def _connect_upstream(self):
        try:
            self.upstream = socket.create_connection(self.proxy.target, timeout=5)
        except OSError:
            # The server is down: the client sees what it would see from a closed port.
            self.ending = "reset"
            return
        self.upstream.setblocking(False)

    def _loop(self):
        while not self.ending:
            mode, kw = self.proxy.current()
            if mode == "reset":
                self.ending = "reset"
                break
            now = time.monotonic()
            reads, writes = [self.wake.r], []
            timeout = None
            if self.family == "forwarding" and mode != "blackhole":
                if self.upstream is None:
                    self._connect_upstream()
                    continue
                for queue, out_name in ((self.to_upstream, "out_upstream"),
                                        (self.to_client, "out_client")):
                    while queue and queue[0][0] <= now:
                        setattr(self, out_name, getattr(self, out_name) + queue.popleft()[1])
                    if queue:
                        wait = queue[0][0] - now
                        timeout = wait if timeout is None else min(timeout, wait)
                if self.eof and not (self.to_upstream or self.to_client or self.out_upstream
                                     or self.out_client):
                    break
                if not self.eof:
                    if self._pending(self.to_upstream, self.out_upstream) < BUFFER_LIMIT:
                        reads.append(self.client)
                    if self._pending(self.to_client, self.out_client) < BUFFER_LIMIT:
                        reads.append(self.upstream)
                if self.out_upstream:
                    writes.append(self.upstream)
                if self.out_client:
                    writes.append(self.client)
            elif self.family == "answering":
                if mode == "endless" and self.streaming and len(self.out_client) < BUFFER_LIMIT:
                    self.out_client += self._endless_piece(kw)
                if self.eof and not self.out_client:
                    break
                if not self.eof:
                    reads.append(self.client)
                if self.out_client:
                    writes.append(self.client)
            readable, writable, _ = select.select(reads, writes, [], timeout)
            if self.wake.r in readable:
                self.wake.drain()
            for sock in readable:
                if sock is not self.wake.r:
                    self._read(sock, mode, kw)
            for sock in writable:
                self._write(sock)

    @staticmethod
    def _pending(queue, out):
        return len(out) + sum(len(chunk) for _, chunk in queue)

    def _read(self, sock, mode, kw):
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        if not data:
            self.eof = True
            return
        mode, kw = self.proxy.current()  # the mode now, not the one read before select()
        if self.family == "answering":
            self._answer(data, mode, kw)
            return
        held = mode == "delay" and (sock is not self.client or not kw.get("replies_only"))
        due = time.monotonic() + (float(kw.get("seconds", 0)) if held else 0.0)
        (self.to_upstream if sock is self.client else self.to_client).append((due, data))

    def _write(self, sock):
        name = "out_upstream" if sock is self.upstream else "out_client"
        data = getattr(self, name)
        try:
            sent = sock.send(data)
        except BlockingIOError:
            return
        setattr(self, name, data[sent:])
        if sent and sock is self.upstream and self.proxy.on_upstream is not None:
            self.proxy.on_upstream(self.number, data[:sent], time.monotonic())

    def _answer(self, data, mode, kw):
        try:
            lines = self.requests.feed(data)
        except ValueError:
            self.ending = "close"
            return
        for _ in lines:
            if self.streaming:
                continue  # an endless body never ends, so nothing after it is ever answered
            if mode == "endless":
                self.streaming = True
                chunked = kw.get("chunked", True)
                self.out_client += (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" +
                                    (b"Transfer-Encoding: chunked\r\n" if chunked else
                                     b"Connection: close\r\n") + b"\r\n")
            else:
                self.out_client += self._http_reply(kw)

    @staticmethod
    def _http_reply(kw):
        if "raw" in kw:
            raw = kw["raw"]
            return raw.encode() if isinstance(raw, str) else raw
        body = kw.get("body", b"")
        body = body.encode() if isinstance(body, str) else body
        status = int(kw.get("status", 503))
        reason = kw.get("reason", "Service Unavailable" if status == 503 else "Error")
        head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
        for name, value in kw.get("headers", {}).items():
            head += f"{name}: {value}\r\n"
        return head.encode("latin-1") + b"\r\n" + body

    @staticmethod
    def _endless_piece(kw):
        piece = kw.get("bytes", b"x" * 1024)
        piece = piece.encode() if isinstance(piece, str) else piece
        piece = piece * max(1, 16384 // len(piece))
        if kw.get("chunked", True):
            return f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        return piece


class FaultProxy:
    """Listens on 127.0.0.1 (a free port) and forwards to target_host:target_port until told
    otherwise. A context manager; stop() closes everything."""

    def __init__(self, target_host, target_port, on_upstream=None):
        self.target = (target_host, int(target_port))
        self.on_upstream = on_upstream  # see the module's doc
        self.mode, self.kw = "pass", {}
        self._lock = threading.Lock()
        self._open = set()
        self._accepted = 0
        self._timer = None
        self._stopping = False
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.address}"
        self._wake = _Wakeup()
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True)
        self._acceptor.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def current(self):
        with self._lock:
            return self.mode, self.kw

    def set_mode(self, mode, **kw):
        """Applies to every connection from now on, open ones included."""
        self._cancel_timer()
        self._set(mode, kw)

    def _set(self, mode, kw):
        if mode not in MODES:
            raise ValueError(f"unknown proxy mode {mode!r}")
        with self._lock:
            self.mode, self.kw = mode, dict(kw)
            conns = list(self._open)
        family = "answering" if mode in ANSWERING else "forwarding"
        for conn in conns:
            if mode == "reset":
                conn.end("reset")
            elif conn.family != family:
                conn.end("close")
            else:
                conn.wake.poke()  # re-read the mode now, not at the next byte

    def outage(self, mode, seconds, **kw):
        """Sets `mode` now and "pass" again after `seconds` (unless set_mode comes first)."""
        self._cancel_timer()
        self._set(mode, kw)
        timer = threading.Timer(seconds, self._set, ("pass", {}))
        timer.daemon = True
        with self._lock:
            self._timer = timer
        timer.start()
        return timer

    def drop_all(self):
        """Closes every open connection now (a FIN, as a restarting server would)."""
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            conn.end("close")

    def connections(self):
        """How many connections were accepted so far."""
        with self._lock:
            return self._accepted

    def open_connections(self):
        with self._lock:
            return len(self._open)

    def stop(self):
        self._cancel_timer()
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            conns = list(self._open)
        self._wake.poke()
        self._acceptor.join(5)
        self._listener.close()
        self._wake.close()
        for conn in conns:
            conn.end("close")
        for conn in conns:
            conn.join(5)

    def _cancel_timer(self):
        with self._lock:
            timer, self._timer = self._timer, None
        if timer:
            timer.cancel()

    def _accept_loop(self):
        while True:
            readable, _, _ = select.select([self._listener, self._wake.r], [], [])
            if self._wake.r in readable:
                return
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            with self._lock:
                self._accepted += 1
                if self.mode == "reset":
                    _rst_close(client)
                    continue
                conn = _Connection(self, client)
                conn.number = self._accepted
                self._open.add(conn)
            conn.start()

    def _forget(self, conn):
        with self._lock:
            self._open.discard(conn)
