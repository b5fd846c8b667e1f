"""ZooKeeper's wire seen from a fault proxy (FaultProxy's on_upstream): the frames a client handed
the server, when each went out, and what a request body asks for."""

import threading


class UpstreamFrames:
    """When a ZooKeeper server can first have read each complete request of the victim's client:
    fed by the fault proxy with the bytes it hands the server (FaultProxy's on_upstream), it splits
    each connection's stream into ZooKeeper's frames (a 4-byte big-endian length, then the body;
    the connect request too) and keeps the instant each one's last byte went out. The server
    touches a session on every request it reads (pings, the keeper's lookups, a reconnection's
    connect request), and not before that instant. on_frame, when set, is called with the
    connection and the first PEEK bytes of each frame's body once it went out, from the proxy's
    thread of that connection (so it can act before anything more passes there)."""

    PEEK = 512

    def __init__(self):
        self._lock = threading.Lock()
        # connection -> [header bytes read so far, body bytes still due, the body's first bytes]
        self._partial = {}
        self.times = []
        self.on_frame = None

    def feed(self, connection, data, when):
        done = []
        with self._lock:
            head, due, body = self._partial.get(connection, (b"", 0, b""))
            view = memoryview(data)
            while view:
                if due:
                    take = min(due, len(view))
                    if len(body) < self.PEEK:
                        body += bytes(view[:min(take, self.PEEK - len(body))])
                    due -= take
                    view = view[take:]
                    if due == 0:
                        self.times.append(when)
                        done.append(body)
                        body = b""
                    continue
                need = 4 - len(head)
                head += bytes(view[:need])
                view = view[need:]
                if len(head) == 4:
                    due = int.from_bytes(head, "big")
                    head = b""
                    if due == 0:  # an empty frame: complete with its header (or not ZooKeeper)
                        self.times.append(when)
                        done.append(b"")
            self._partial[connection] = (head, due, body)
            hook = self.on_frame
        if hook is not None:
            for body in done:
                hook(connection, body)

    def clear(self):
        with self._lock:
            self._partial.clear()
            self.times = []

    def sent(self):
        with self._lock:
            return list(self.times)


# ZooKeeper's request types (jute's OpCode) by name; a connection's first frame is its connect
# request, which has no request header.
ZK_OPS = {1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData", 8: "getChildren",
          9: "sync", 11: "ping", 12: "getChildren2", 13: "check", 14: "multi", 15: "create2",
          17: "checkWatches", 18: "removeWatches", 19: "createContainer", 21: "createTTL",
          101: "setWatches", 105: "setWatches2", 106: "addWatch", -11: "closeSession"}


def zk_op(body):
    """The name of the request a frame's body (after its length) carries."""
    if len(body) < 8:
        return "?"
    op = int.from_bytes(body[4:8], "big", signed=True)
    return ZK_OPS.get(op, str(op))


class RequestLog(UpstreamFrames):
    """The requests a client handed the server, in order, as (connection, name): zk_op's names,
    and "connect" for a connection's first frame. Pings are left out unless `pings`: they depend
    on time alone, not on what the client does. Use its feed as the proxy's on_upstream."""

    def __init__(self, pings=False):
        super().__init__()
        self._pings = pings
        self._named = threading.Lock()
        self._requests = []
        self._connections = set()
        self.on_frame = self._note

    def _note(self, connection, body):
        with self._named:
            first = connection not in self._connections
            self._connections.add(connection)
            name = "connect" if first else zk_op(body)
            if name != "ping" or self._pings:
                self._requests.append((connection, name))

    def requests(self):
        with self._named:
            return list(self._requests)


# The requests that create a node; the request's path follows the request header (xid, type), as
# a 4-byte length and its bytes.
ZK_CREATES = {op: name for op, name in ZK_OPS.items() if name.startswith("create")}


def zk_created_path(body):
    """The path a request body (after its length) asks to create, or None for other requests."""
    if len(body) < 12 or int.from_bytes(body[4:8], "big", signed=True) not in ZK_CREATES:
        return None
    size = int.from_bytes(body[8:12], "big", signed=True)
    if size < 0 or len(body) < 12 + size:
        return None
    return body[12:12 + size].decode(errors="replace")
