"""What the harness knows of a ZooKeeper victim's session without a server: the frames its proxy
handed the server (UpstreamFrames), the creates among them, the lease deadline drawn from them,
and which faults apply."""

import os
import struct
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "e2e")]
from scenarios import ZooKeeperBackend, faults_for  # noqa: E402
from zk_frames import UpstreamFrames, zk_created_path  # noqa: E402


def frame(body):
    return struct.pack(">i", len(body)) + body


class UpstreamFramesTest(unittest.TestCase):
    def test_a_frame_counts_when_its_last_byte_went_out(self):
        f = UpstreamFrames()
        ping = frame(b"\xff\xff\xff\xfe\x00\x00\x00\x0b")
        f.feed(1, ping[:3], 1.0)
        f.feed(1, ping[3:6], 2.0)
        self.assertEqual(f.sent(), [])
        f.feed(1, ping[6:], 3.0)
        self.assertEqual(f.sent(), [3.0])

    def test_frames_in_one_chunk_and_across_chunks(self):
        f = UpstreamFrames()
        a, b, c = frame(b"x" * 40), frame(b""), frame(b"y" * 70000)
        f.feed(1, a + b + c[:100], 1.0)
        self.assertEqual(f.sent(), [1.0, 1.0])
        f.feed(1, c[100:], 2.0)
        self.assertEqual(f.sent(), [1.0, 1.0, 2.0])

    def test_connections_are_split_apart(self):
        f = UpstreamFrames()
        a, b = frame(b"a" * 10), frame(b"b" * 10)
        f.feed(1, a[:7], 1.0)
        f.feed(2, b, 2.0)  # a new connection (a reconnection) starts with a header of its own
        f.feed(1, a[7:], 3.0)
        self.assertEqual(f.sent(), [2.0, 3.0])

    def test_clear_forgets_times_and_partial_frames(self):
        f = UpstreamFrames()
        f.feed(1, frame(b"abc") + frame(b"de")[:5], 1.0)
        f.clear()
        self.assertEqual(f.sent(), [])
        f.feed(2, frame(b"z"), 2.0)
        self.assertEqual(f.sent(), [2.0])


def request(xid, op, path, rest=b""):
    raw = path.encode()
    return struct.pack(">iii", xid, op, len(raw)) + raw + rest


class CreatedPathTest(unittest.TestCase):
    def test_the_path_of_a_create(self):
        data = b'{"limit":1}'
        body = request(7, 15, "/p/_c_6e7cecdd-6c3a-4a97-9d34-b19bbc7df5cf-lock-",
                       struct.pack(">i", len(data)) + data)
        self.assertEqual(zk_created_path(body), "/p/_c_6e7cecdd-6c3a-4a97-9d34-b19bbc7df5cf-lock-")
        self.assertEqual(zk_created_path(request(8, 19, "/p")), "/p")  # a container parent

    def test_other_requests_and_short_bodies_are_none(self):
        self.assertIsNone(zk_created_path(request(9, 3, "/p/x")))  # exists
        self.assertIsNone(zk_created_path(request(9, 15, "/p/x")[:14]))
        self.assertIsNone(zk_created_path(b"\x00" * 8))

    def test_on_frame_sees_each_body_once_it_went_out(self):
        f, got = UpstreamFrames(), []
        f.on_frame = lambda connection, body: got.append((connection, zk_created_path(body)))
        create = frame(request(1, 15, "/p/_c_x-lock-"))
        f.feed(3, create[:9], 1.0)
        self.assertEqual(got, [])
        f.feed(3, create[9:] + frame(request(2, 3, "/p")), 2.0)
        self.assertEqual(got, [(3, "/p/_c_x-lock-"), (3, None)])


def backend_with(times, granted=None):
    b = ZooKeeperBackend()  # no server: deadline() reads only what the proxy reported
    b.frames = UpstreamFrames()
    b.granted = {"victim0": granted} if granted else {}
    for at in times:
        b.frames.feed(1, frame(b"p"), at)
    return b


def victim(spawned, end):
    return types.SimpleNamespace(tag="victim0", section=types.SimpleNamespace(
        spawned=spawned, end=end, lease="1000147bcd70000"))


def run_of(windows=(), short=True):
    return types.SimpleNamespace(windows=list(windows), fault=types.SimpleNamespace(short=short))


class DeadlineTest(unittest.TestCase):
    def test_the_timeout_after_the_last_request_read(self):
        b = backend_with([1.0, 2.0, 3.0])
        self.assertEqual(b.deadline(run_of(), victim(0.5, 4.0)), 8.0)  # 3.0 + 5 s

    def test_the_granted_timeout_wins_over_the_one_asked_for(self):
        b = backend_with([1.0, 2.0], granted=4.0)
        self.assertEqual(b.deadline(run_of(), victim(0.5, 3.0)), 6.0)

    def test_requests_read_while_the_server_was_paused_renew_nothing(self):
        b = backend_with([1.0, 2.0, 7.5])  # 7.5: queued during a pause, read at the resume
        self.assertEqual(b.deadline(run_of([(2.5, 7.6)]), victim(0.5, 6.5)), 7.0)

    def test_a_request_after_the_expiry_renews_nothing(self):
        b = backend_with([1.0, 6.5, 7.0])  # nothing from 1.0 to 6.5: expired at 6.0 at the latest
        self.assertEqual(b.deadline(run_of(), victim(0.5, 5.5)), 6.0)

    def test_without_a_request_the_spawn_bounds_the_session(self):
        b = backend_with([])
        self.assertEqual(b.deadline(run_of(short=False), victim(0.5, 3.0)), 10.5)


class FaultsTest(unittest.TestCase):
    def test_zookeeper_meets_no_http_fault_and_its_own(self):
        names = [f.name for f in faults_for("zookeeper")]
        self.assertIn("node deleted", names)
        self.assertIn("proxy reset > TTL", names)
        self.assertIn("SIGSTOP server > TTL", names)
        self.assertIn("connection cut at create", names)
        self.assertFalse([n for n in names if "5xx" in n or "malformed" in n or "endless" in n])

    def test_the_other_backends_do_not_meet_zookeepers_own(self):
        for backend in ("local", "consul", "etcd"):
            names = [f.name for f in faults_for(backend)]
            self.assertNotIn("node deleted", names)
            self.assertNotIn("proxy reset > TTL", names)
            self.assertNotIn("connection cut at create", names)
        self.assertIn("5xx 2.5s", [f.name for f in faults_for("etcd")])


if __name__ == "__main__":
    unittest.main()
