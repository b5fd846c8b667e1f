"""A stand-in for etcd's JSON gateway, in this process, on a free loopback port: just enough of
the lease, KV and watch API for `lock` to queue, hold and release the way it does against etcd
(the same reply shapes, measured on etcd 3.4), and replies a test may replace, to see what
`lock` makes of a server that misbehaves in ways a real etcd cannot be made to.

    with FakeEtcd() as etcd:
        etcd.override("/v3/kv/txn", lambda request, default: reply(200, {...}))
        run_lock("-endpoints", etcd.url, ...)
        etcd.requests("/v3/watch")   # times at which each watch arrived
"""

import base64
import http.server
import json
import threading
import time


def b64(data):
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def unb64(text):
    return base64.b64decode(text or "").decode(errors="replace")


class Reply:
    """What the server sends: a status, headers and a body, or `stream`, a function given the
    handler's write(bytes) that sends a streamed body (the connection is closed after it)."""

    def __init__(self, status=200, body=None, headers=None, stream=None, reason=None):
        self.status, self.headers, self.stream, self.reason = status, headers or {}, stream, reason
        self.body = body if isinstance(body, (bytes, type(None))) else \
            (body if isinstance(body, str) else json.dumps(body)).encode()


def reply(status=200, body=None, **kwargs):
    return Reply(status, body, **kwargs)


class FakeEtcd:
    def __init__(self):
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.revision = 1
        self.next_lease = 0x694d7c3e5a1b2c00
        self.leases = {}  # id -> TTL
        self.kvs = {}  # key -> {"value", "create_revision", "mod_revision", "lease"}
        self.overrides = {}  # path -> function(request, default) -> Reply
        self.log = []  # (monotonic time, path, request)

    # --- the test's side ---

    def __enter__(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                try:
                    request = json.loads(raw or b"{}")
                except ValueError:
                    request = {}
                fake.serve(self, self.path, request)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def override(self, path, answer):
        """Replaces the answer to `path`: answer(request, default) returns a Reply, where
        default() is what the fake would have answered (and done) otherwise."""
        self.overrides[path] = answer

    def requests(self, path):
        with self.lock:
            return [t for t, p, _ in self.log if p == path]

    def put_key(self, key, lease=0, value=""):
        """A key someone else put, e.g. a holder ahead of the one under test."""
        with self.lock:
            self.revision += 1
            self.kvs[key] = {"value": value, "create_revision": self.revision,
                             "mod_revision": self.revision, "lease": lease}

    def live_leases(self):
        with self.lock:
            return set(self.leases)

    # --- the server's side ---

    def header(self):
        return {"cluster_id": "1", "member_id": "2", "revision": str(self.revision), "raft_term": "2"}

    def kv_json(self, key, keys_only=False):
        kv = self.kvs[key]
        out = {"key": b64(key), "create_revision": str(kv["create_revision"]),
               "mod_revision": str(kv["mod_revision"]), "version": "1"}
        if kv["lease"]:
            out["lease"] = str(kv["lease"])
        if kv["value"] and not keys_only:
            out["value"] = b64(kv["value"])
        return out

    def serve(self, handler, path, request):
        with self.lock:
            self.log.append((time.monotonic(), path, request))
        default = lambda: self.answer(path, request)  # noqa: E731
        answer = self.overrides.get(path)
        r = answer(request, default) if answer else default()
        try:
            self.send(handler, r)
        except OSError:
            handler.close_connection = True  # the client gave up waiting: nothing to tell

    def send(self, handler, r):
        handler.send_response(r.status, r.reason)
        for name, value in r.headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Type", "application/json")
        if r.stream:
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.close_connection = True

            def write(data):
                handler.wfile.write(data)
                handler.wfile.flush()
            r.stream(write)  # until it ends, or the client goes (OSError)
            return
        body = r.body or b""
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def answer(self, path, request):
        with self.lock:
            if path == "/v3/lease/grant":
                self.next_lease += 1
                ttl = max(int(request.get("TTL", 0)), 2)
                self.leases[self.next_lease] = ttl
                return reply(200, {"header": self.header(), "ID": str(self.next_lease), "TTL": str(ttl)})
            if path == "/v3/lease/keepalive":
                lease = int(request["ID"])
                result = {"header": self.header(), "ID": str(lease)}
                if lease in self.leases:
                    result["TTL"] = str(self.leases[lease])
                return reply(200, {"result": result})
            if path == "/v3/lease/revoke":
                lease = int(request["ID"])
                if lease not in self.leases:
                    return reply(404, {"error": "etcdserver: requested lease not found",
                                       "message": "etcdserver: requested lease not found", "code": 5})
                del self.leases[lease]
                gone = [k for k, kv in self.kvs.items() if kv["lease"] == lease]
                if gone:
                    self.revision += 1
                for k in gone:
                    del self.kvs[k]
                return reply(200, {"header": self.header()})
            if path == "/v3/kv/txn":
                return reply(200, self.txn(request))
            if path == "/v3/kv/range":
                return reply(200, self.range(request))
            if path == "/v3/kv/put":
                key = unb64(request["key"])
                self.revision += 1
                old = self.kvs.get(key)
                self.kvs[key] = {"value": unb64(request.get("value")),
                                 "create_revision": old["create_revision"] if old else self.revision,
                                 "mod_revision": self.revision, "lease": int(request.get("lease", 0))}
                return reply(200, {"header": self.header()})
            if path == "/v3/watch":
                return reply(200, stream=self.quiet_watch)
        return reply(404, "404 page not found\n")

    def txn(self, request):
        # Only the shape lock sends: put if absent, then in both branches a read of the queue.
        key = unb64(request["compare"][0]["key"])
        succeeded = key not in self.kvs
        branch = request["success" if succeeded else "failure"]
        responses = []
        if succeeded:
            put = branch[0]["request_put"]
            self.revision += 1
            self.kvs[key] = {"value": unb64(put.get("value")), "create_revision": self.revision,
                             "mod_revision": self.revision, "lease": int(put.get("lease", 0))}
            responses.append({"response_put": {"header": {"revision": str(self.revision)}}})
        responses.append({"response_range": self.range(branch[-1]["request_range"])})
        out = {"header": self.header(), "responses": responses}
        if succeeded:
            out["succeeded"] = True
        return out

    def range(self, request):
        start = unb64(request["key"])
        end = base64.b64decode(request.get("range_end", "")).decode(errors="replace")
        most = int(request.get("max_create_revision", 0))
        keys = [k for k in self.kvs
                if (k == start if not end else (k >= start and (end == "\0" or k < end)))
                and (not most or self.kvs[k]["create_revision"] <= most)]
        keys.sort(key=lambda k: self.kvs[k]["create_revision"],
                  reverse=request.get("sort_order") == "DESCEND")
        if int(request.get("limit", 0)):
            keys = keys[:int(request["limit"])]
        out = {"header": self.header(), "kvs": [self.kv_json(k, request.get("keys_only")) for k in keys]}
        if keys:
            out["count"] = str(len(keys))
        else:
            del out["kvs"]
        return out

    def quiet_watch(self, write):
        """A watch that is created and then hears nothing, until the server stops."""
        write((json.dumps({"result": {"header": self.header(), "created": True}}) + "\n").encode())
        while not self.stopping.wait(0.2):
            pass
