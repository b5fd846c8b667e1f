"""A stand-in for systemd's notification socket (sd_notify(3)): a bound datagram socket that a thread
reads as datagrams come, keeping each with the sender's pid (as systemd checks it) and the time it
arrived."""

import os
import re
import select
import socket
import struct
import threading
import time
import uuid

from harness import SLOW


class Datagram:
    """One notification: its place in the socket's queue, when it arrived, the sender's pid, and
    its KEY=value assignments in order (lines that are not one are kept apart, as malformed)."""

    def __init__(self, seq, arrived, pid, raw):
        self.seq, self.time, self.pid, self.raw = seq, arrived, pid, raw
        lines = raw.decode("utf-8", "surrogateescape").split("\n")
        if lines[-1] == "":
            lines.pop()  # a final newline is allowed, as sd_notify allows it
        self.fields, self.malformed = [], []
        for line in lines:
            key, eq, value = line.partition("=")
            if eq and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key):
                self.fields.append((key, value))
            else:
                self.malformed.append(line)

    def get(self, key):
        values = [v for k, v in self.fields if k == key]
        return values[-1] if values else None

    def __repr__(self):
        return f"#{self.seq} +{self.time:.3f}s pid {self.pid}: {self.raw!r}"


class NotifySocket:
    """A bound SOCK_DGRAM socket, in the scratch directory or in the abstract namespace, that a
    thread reads from as datagrams come. `address` is what NOTIFY_SOCKET says. `on_datagram`, if
    set, runs in that thread as each one arrives, before anyone else sees it: a check of what is
    true at the very moment lock said something."""

    def __init__(self, testcase, abstract=False):
        if abstract:
            name = f"lock-e2e-{uuid.uuid4().hex}"
            self.address, self.bind_address = "@" + name, "\0" + name
        else:
            self.address = self.bind_address = testcase.path("notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        # The kernel then tells us each sender's pid, as it tells systemd.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(self.bind_address)
        self.on_datagram = None
        self.hook_errors = []
        self.received = []
        self.changed = threading.Condition()
        self.epoch = time.monotonic()
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()
        testcase.addCleanup(self.close)

    def close(self):
        os.write(self._stop_w, b"x")
        self._thread.join()
        for fd in (self._stop_r, self._stop_w):
            os.close(fd)
        self.sock.close()

    def _receive(self):
        creds = struct.calcsize("3i")
        while True:
            ready, _, _ = select.select([self.sock, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            raw, ancillary, _, _ = self.sock.recvmsg(1 << 16, socket.CMSG_SPACE(creds))
            arrived = time.monotonic()
            pid = next((struct.unpack("3i", data[:creds])[0] for level, kind, data in ancillary
                        if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS)), None)
            datagram = Datagram(len(self.received), arrived - self.epoch, pid, raw)
            if self.on_datagram:
                try:
                    self.on_datagram(datagram)
                except Exception as e:  # reported by the test, not lost in this thread
                    self.hook_errors.append(e)
            with self.changed:
                self.received.append(datagram)
                self.changed.notify_all()

    def datagrams(self, pid=None):
        """What arrived so far (from `pid` only, if given), in the order it was queued."""
        with self.changed:
            return [d for d in self.received if pid is None or d.pid == pid]

    def wait_until(self, condition, timeout, what):
        """Waits until condition() is truthy, re-checking as each datagram comes; fails the test at
        the deadline with everything that did arrive."""
        deadline = time.monotonic() + timeout * SLOW
        with self.changed:
            while True:
                value = condition()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout * SLOW:.1f}s waiting for "
                                         f"{what}; received: {self.received}")
                self.changed.wait(left)

    def wait_for_message(self, predicate, timeout=10.0, what="a datagram", pid=None, after=-1):
        """The first datagram (from `pid`, queued after number `after`) that satisfies
        `predicate`, once it has arrived."""
        def found():
            return next((d for d in self.received
                         if d.seq > after and (pid is None or d.pid == pid) and predicate(d)), None)
        return self.wait_until(found, timeout, what)

    def sync(self):
        """Sends a datagram of our own and waits for it: the socket's queue is in order, so
        everything sent before now (by a lock that has exited, say) has then arrived."""
        token = uuid.uuid4().hex
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(f"SYNC={token}".encode(), self.bind_address)
        self.wait_for_message(lambda d: d.get("SYNC") == token, 5, "our own datagram")
