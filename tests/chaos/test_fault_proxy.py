"""The fault proxy itself: each mode does what the fault scenarios count on, against a small echo
server and a plain HTTP client."""

import http.client
import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from fault_proxy import FaultProxy  # noqa: E402
from harness import wait_for  # noqa: E402


class EchoServer:
    """Echoes every byte back, one thread per connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn):
        with conn:
            try:
                while data := conn.recv(65536):
                    conn.sendall(data)
            except OSError:
                pass

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept, so the port closes
        except OSError:
            pass
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


class FaultProxyTest(unittest.TestCase):
    def setUp(self):
        self.echo = EchoServer()
        self.proxy = FaultProxy("127.0.0.1", self.echo.port)
        self.addCleanup(self.echo.close)
        self.addCleanup(self.proxy.stop)

    def connect(self, timeout=10):
        s = socket.create_connection(("127.0.0.1", self.proxy.port), timeout=timeout)
        self.addCleanup(s.close)
        return s

    def test_pass_forwards_both_ways_and_counts(self):
        self.assertEqual(self.proxy.url, f"http://127.0.0.1:{self.proxy.port}")
        s = self.connect()
        payload = os.urandom(300_000)
        threading.Thread(target=s.sendall, args=(payload,), daemon=True).start()
        self.assertEqual(recv_exactly(s, len(payload)), payload)
        self.connect()
        wait_for(lambda: self.proxy.connections() == 2, 5, "two accepted connections")

    def test_delay_holds_each_chunk(self):
        s = self.connect()
        self.proxy.set_mode("delay", seconds=0.3)
        start = time.monotonic()
        s.sendall(b"ping")
        self.assertEqual(recv_exactly(s, 4), b"ping")
        # Delayed on the way there and on the way back.
        self.assertGreaterEqual(time.monotonic() - start, 0.6)

    def test_delay_of_replies_only_lets_requests_through_at_once(self):
        heard = []
        self.proxy.on_upstream = lambda connection, data, when: heard.append(when)
        s = self.connect()
        self.proxy.set_mode("delay", seconds=0.3, replies_only=True)
        start = time.monotonic()
        s.sendall(b"ping")
        self.assertEqual(recv_exactly(s, 4), b"ping")
        back = time.monotonic()
        self.assertLess(heard[0] - start, 0.2)  # the server had it at once
        self.assertGreaterEqual(back - start, 0.3)
        self.assertLess(back - start, 0.6)

    def test_blackhole_holds_until_pass_and_loses_nothing(self):
        s = self.connect()
        s.sendall(b"a")
        self.assertEqual(recv_exactly(s, 1), b"a")
        self.proxy.set_mode("blackhole")
        s.sendall(b"held")
        s.settimeout(0.5)
        self.assertRaises(socket.timeout, s.recv, 1)
        late = self.connect()  # accepted, but not answered either
        late.sendall(b"late")
        self.proxy.set_mode("pass")
        s.settimeout(10)
        self.assertEqual(recv_exactly(s, 4), b"held")
        self.assertEqual(recv_exactly(late, 4), b"late")

    def test_reset_sends_rst_to_open_and_new_connections(self):
        s = self.connect()
        self.proxy.set_mode("reset")
        with self.assertRaises(ConnectionResetError):
            s.recv(1)
        with self.assertRaises((ConnectionResetError, BrokenPipeError)):
            fresh = self.connect()  # the RST may beat connect()'s own return
            fresh.sendall(b"x")
            fresh.recv(1)

    def test_http_answers_each_request_on_one_connection(self):
        self.proxy.set_mode("http", status=503, reason="Service Unavailable", body="no leader",
                            headers={"Retry-After": "1"})
        conn = http.client.HTTPConnection("127.0.0.1", self.proxy.port, timeout=10)
        self.addCleanup(conn.close)
        for path in ("/v3/lease/grant", "/v1/session/create"):
            conn.request("POST", path, body=b'{"TTL": 10}')
            reply = conn.getresponse()
            self.assertEqual((reply.status, reply.reason, reply.read(), reply.getheader("Retry-After")),
                             (503, "Service Unavailable", b"no leader", "1"))
        self.assertEqual(self.proxy.connections(), 1)

    def test_endless_body_never_ends(self):
        for chunked in (True, False):
            self.proxy.set_mode("endless", bytes=b'{"result":', chunked=chunked)
            conn = http.client.HTTPConnection("127.0.0.1", self.proxy.port, timeout=10)
            conn.request("GET", "/v3/watch")
            reply = conn.getresponse()
            self.assertEqual(reply.status, 200)
            got = 0
            while got < 4_000_000:
                got += len(reply.read(65536))
            conn.close()

    def test_outage_returns_to_pass(self):
        s = self.connect()
        self.proxy.outage("blackhole", 0.3)
        s.sendall(b"after")
        self.assertEqual(recv_exactly(s, 5), b"after")  # flows once the outage is over
        self.assertEqual(self.proxy.current()[0], "pass")

    def test_set_mode_cancels_a_pending_outage_end(self):
        timer = self.proxy.outage("blackhole", 0.2)
        self.proxy.set_mode("http", status=500)
        timer.join(5)  # a cancelled timer's thread ends without running its function
        self.assertFalse(timer.is_alive())
        self.assertEqual(self.proxy.current()[0], "http")

    def test_drop_all_closes_open_connections(self):
        s = self.connect()
        s.sendall(b"x")
        self.assertEqual(recv_exactly(s, 1), b"x")
        self.proxy.drop_all()
        self.assertEqual(s.recv(1), b"")
        wait_for(lambda: self.proxy.open_connections() == 0, 5, "the proxy to forget them")

    def test_switching_to_answering_closes_forwarded_connections(self):
        s = self.connect()
        s.sendall(b"x")
        self.assertEqual(recv_exactly(s, 1), b"x")
        self.proxy.set_mode("http", status=500)
        self.assertEqual(s.recv(1), b"")

    def test_target_down_looks_like_a_refused_port(self):
        self.echo.close()
        with self.assertRaises((ConnectionResetError, BrokenPipeError)):
            s = self.connect()  # the RST may beat connect()'s own return
            s.sendall(b"x")
            s.recv(1)


class UpstreamReportTest(unittest.TestCase):
    """on_upstream: what reached the server's socket, per connection, and when."""

    def setUp(self):
        self.echo = EchoServer()
        self.seen = []
        self.lock = threading.Lock()
        self.proxy = FaultProxy("127.0.0.1", self.echo.port, on_upstream=self.record)
        self.addCleanup(self.echo.close)
        self.addCleanup(self.proxy.stop)

    def record(self, connection, data, when):
        with self.lock:
            self.seen.append((connection, data, when))

    def sent(self, connection):
        with self.lock:
            return b"".join(d for c, d, _ in self.seen if c == connection)

    def test_reports_every_byte_per_connection(self):
        a = socket.create_connection(("127.0.0.1", self.proxy.port), timeout=10)
        b = socket.create_connection(("127.0.0.1", self.proxy.port), timeout=10)
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        payload = os.urandom(200_000)
        threading.Thread(target=a.sendall, args=(payload,), daemon=True).start()
        b.sendall(b"second")
        self.assertEqual(recv_exactly(a, len(payload)), payload)
        self.assertEqual(recv_exactly(b, 6), b"second")
        self.assertEqual(self.sent(1), payload)
        self.assertEqual(self.sent(2), b"second")
        times = [w for _, _, w in self.seen]
        self.assertEqual(times, sorted(times))

    def test_nothing_reported_while_held(self):
        s = socket.create_connection(("127.0.0.1", self.proxy.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(b"a")
        self.assertEqual(recv_exactly(s, 1), b"a")
        self.proxy.set_mode("blackhole")
        s.sendall(b"held")
        time.sleep(0.3)  # the length of the hold, not a wait for an event
        self.assertEqual(self.sent(1), b"a")
        released = time.monotonic()
        self.proxy.set_mode("pass")
        self.assertEqual(recv_exactly(s, 4), b"held")
        self.assertEqual(self.sent(1), b"aheld")
        self.assertGreaterEqual(self.seen[-1][2], released)


if __name__ == "__main__":
    unittest.main()
