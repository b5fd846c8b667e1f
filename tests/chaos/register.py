"""The store of the register workload (Jepsen's lock-set, as a counter): a server on a unix socket
that holds two registers side by side, and a record of every write it was asked for.

Each critical section (contenders.SECTION) does a read-modify-write under the lock: it reads both
registers, waits its section length (where a pause can land), and writes what it read plus one,
carrying its fencing token ($LOCK_FENCING_TOKEN) with every request. The two registers differ in
what they do with the token:

  checked    refuses a write whose token is lower than the highest it has seen in a request it
             took, a read included. Reads count because the section's write depends on its read:
             with writes alone, a stale holder (token 5) that read 10 could still write 11 after
             its successor (token 6) read 10 but before it wrote, and the successor's 11 would
             then erase it. A fenced store checks the token on every operation.
  unchecked  takes every write: what a lock alone, without fencing, protects.

Line protocol, one connection per section, one answer line per request:

    R <token> <pid>                        ->  <checked> <unchecked>
    W <token> <pid> <checked> <unchecked>  ->  <ok|refused> ok

One thread serves every connection in the order their bytes arrive (one poll set), so a write
that a killed section sent before it died is taken before anything its successor, which could
only connect after that death, sends. checker.py counts the lost updates from the record.
"""

import os
import selectors
import socket
import threading
import time

from checker import RegisterLog, RegisterWrite

NAMES = ("checked", "unchecked")


def _token(text):
    try:
        return int(text)
    except ValueError:
        return None  # "-": no token; the checked register takes no write without one


class Registers:
    """The two registers and the record of what was asked of them, without the server: request()
    takes one line of the protocol and returns the answer."""

    def __init__(self):
        self.values = dict.fromkeys(NAMES, 0)
        self.fence = None  # the highest token the checked register has seen
        self.writes = {name: [] for name in NAMES}
        self.reads = {}  # pid -> (checked, unchecked) it read
        self.errors = []  # requests that did not parse: the section and the store disagree

    def request(self, line):
        f = line.split()
        try:
            if len(f) == 3 and f[0] == "R":
                token, pid = _token(f[1]), int(f[2])
                self._see(token)
                self.reads[pid] = (self.values["checked"], self.values["unchecked"])
                return f"{self.values['checked']} {self.values['unchecked']}"
            if len(f) == 5 and f[0] == "W":
                token, pid, new = _token(f[1]), int(f[2]), (int(f[3]), int(f[4]))
                read = self.reads.get(pid, (None, None))
                taken = token is not None and (self.fence is None or token >= self.fence)
                if taken:
                    self._see(token)
                at = time.monotonic()
                answers = []
                for i, (name, ok) in enumerate(zip(NAMES, (taken, True))):
                    self.writes[name].append(RegisterWrite(pid, token, read[i], self.values[name],
                                                           new[i], ok, at))
                    if ok:
                        self.values[name] = new[i]
                    answers.append("ok" if ok else "refused")
                return " ".join(answers)
        except ValueError:
            pass
        self.errors.append(line[:200])
        return "error"

    def _see(self, token):
        if token is not None and (self.fence is None or token > self.fence):
            self.fence = token

    def refused(self, pid):
        """Whether the checked register refused a write of `pid` (for a stale token)."""
        return any(w.pid == pid and not w.accepted for w in list(self.writes["checked"]))

    def logs(self):
        """{register name: checker.RegisterLog}, the final values as they stand."""
        return {name: RegisterLog(name, self.values[name], list(self.writes[name]))
                for name in NAMES}


class RegisterStore(threading.Thread):
    """Serves Registers at `path` (a unix socket) until stop(), which returns their logs."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.registers = Registers()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._server.bind(path)
            self._server.listen(64)
        except OSError:
            self._server.close()
            raise
        self._wake_r, self._wake_w = os.pipe()
        self._selector = selectors.DefaultSelector()
        self._buffers = {}
        self.start()

    @property
    def errors(self):
        return self.registers.errors

    def refused(self, pid):
        return self.registers.refused(pid)

    def stop(self):
        """Ends the server (every section must be over) and returns the logs."""
        os.write(self._wake_w, b"x")
        self.join(10)
        for conn in list(self._buffers):
            self._drop(conn)
        self._selector.close()
        self._server.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        try:
            os.unlink(self.path)
        except OSError:
            pass
        return self.registers.logs()

    def run(self):
        self._selector.register(self._server, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        stopping = False
        while True:
            # Once told to stop, what is still queued is taken first: a killed section's last
            # write may be waiting in its socket, and it counts like any other.
            events = self._selector.select(0 if stopping else None)
            busy = False
            for key, _ in events:
                if key.fileobj == self._wake_r:
                    stopping = True
                    continue
                busy = True
                if key.fileobj is self._server:
                    self._accept()
                else:
                    self._serve(key.fileobj)
            if stopping and not busy:
                return

    def _accept(self):
        try:
            conn, _ = self._server.accept()
        except OSError:
            return
        conn.setblocking(False)
        self._buffers[conn] = b""
        self._selector.register(conn, selectors.EVENT_READ)

    def _drop(self, conn):
        self._buffers.pop(conn, None)
        try:
            self._selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def _serve(self, conn):
        try:
            chunk = conn.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            return self._drop(conn)
        lines = (self._buffers[conn] + chunk).split(b"\n")
        self._buffers[conn] = lines.pop()
        for line in lines:
            answer = self.registers.request(line.decode(errors="replace"))
            try:
                conn.sendall(answer.encode() + b"\n")
            except OSError:
                pass  # the section died waiting: what it asked for stands all the same
