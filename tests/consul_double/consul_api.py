"""A Python port of the parts of Consul's Go API client (api/api.go, kv.go, session.go,
agent.go) that the lock and semaphore recipes use: the same requests, parameters, error texts
and retry classification, so the recipes built on it behave as the Go ones do."""

import base64
import http.client
import json
import posixpath
import socket
import ssl
import time
import urllib.parse

from godur import parse_duration

SERVER_ERROR = "Unexpected response code: 500"


class StatusError(Exception):
    """api.StatusError."""

    def __init__(self, code, body):
        super().__init__(f"Unexpected response code: {code} ({body})")


class NetError(Exception):
    """A failure below HTTP; Go reports these as net.Error."""


def is_retryable_error(err):
    """api.IsRetryableError: network errors and 500s."""
    return isinstance(err, NetError) or SERVER_ERROR in str(err)


def dur_to_msec(seconds):
    """api.durToMsec: whole milliseconds, at least 1 for a positive duration."""
    ms = int(seconds * 1000)
    if seconds > 0 and ms == 0:
        ms = 1
    return f"{ms}ms"


class KVPair:
    def __init__(self, key, value=None, flags=0, session="", modify_index=0, lock_index=0,
                 create_index=0):
        self.key, self.value, self.flags, self.session = key, value, flags, session
        self.modify_index, self.lock_index = modify_index, lock_index
        self.create_index = create_index

    @classmethod
    def from_json(cls, d):
        value = base64.b64decode(d["Value"]) if d.get("Value") is not None else None
        return cls(d["Key"], value, d.get("Flags", 0), d.get("Session", ""),
                   d.get("ModifyIndex", 0), d.get("LockIndex", 0), d.get("CreateIndex", 0))


class QueryOptions:
    def __init__(self, wait_time=0.0, wait_index=0, require_consistent=False):
        self.wait_time, self.wait_index = wait_time, wait_index
        self.require_consistent = require_consistent


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


class Client:
    """api.NewClient: the address may be host:port, http://, https:// or unix:///path."""

    def __init__(self, address, token="", ca_file="", client_cert="", client_key=""):
        self.token = token
        scheme, sep, rest = address.partition("://")
        if not sep:
            scheme, rest = "http", address
        self.scheme, self.address = scheme, rest
        self._tls = None
        if scheme == "https":
            self._tls = ssl.create_default_context(cafile=ca_file or None)
            if client_cert:
                self._tls.load_cert_chain(client_cert, client_key)

    def _connection(self):
        if self.scheme == "unix":
            return _UnixConnection(self.address)
        host, port = self.address.rsplit(":", 1)
        if self._tls is not None:
            return http.client.HTTPSConnection(host, int(port), context=self._tls)
        return http.client.HTTPConnection(host, int(port))

    def do(self, method, path, params=None, body=None, q=None):
        """request.toHTTP + Client.doRequest: query options become parameters, sorted as
        url.Values.Encode sorts them. Returns (status, headers, body)."""
        params = dict(params or {})
        if q is not None:
            if q.require_consistent:
                params["consistent"] = ""
            if q.wait_index:
                params["index"] = str(q.wait_index)
            if q.wait_time:
                params["wait"] = dur_to_msec(q.wait_time)
        query = urllib.parse.urlencode(sorted(params.items()))
        url = urllib.parse.quote(path) + ("?" + query if query else "")
        headers = {"X-Consul-Token": self.token} if self.token else {}
        if body is not None:
            headers["Content-Type"] = "application/json"
        conn = self._connection()
        try:
            conn.request(method, url, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise NetError(f"{method} {path}: {e}") from None
        finally:
            conn.close()

    def _require_ok(self, status, data):
        if status != 200:
            raise StatusError(status, data.decode(errors="replace").strip())

    # -- api/kv.go --

    def kv_get(self, key, q=None):
        """KV.Get: (pair or None, LastIndex)."""
        status, headers, data = self.do("GET", "/v1/kv/" + key, q=q)
        index = int(headers.get("X-Consul-Index") or 0)
        if status == 404:
            return None, index
        if status != 200:
            raise Exception(f"Unexpected response code: {status}")
        entries = json.loads(data)
        return (KVPair.from_json(entries[0]) if entries else None), index

    def kv_list(self, prefix, q=None):
        """KV.List: (pairs or None, LastIndex)."""
        status, headers, data = self.do("GET", "/v1/kv/" + prefix, {"recurse": ""}, q=q)
        index = int(headers.get("X-Consul-Index") or 0)
        if status == 404:
            return None, index
        if status != 200:
            raise Exception(f"Unexpected response code: {status}")
        return [KVPair.from_json(e) for e in json.loads(data)], index

    def _kv_put(self, key, params, body):
        if key.startswith("/"):
            raise Exception(f"Invalid key. Key must not begin with a '/': {key}")
        status, _, data = self.do("PUT", "/v1/kv/" + key, params, body or b"")
        self._require_ok(status, data)
        return b"true" in data

    def _flags(self, p):
        return {"flags": str(p.flags)} if p.flags else {}

    def kv_acquire(self, p):
        return self._kv_put(p.key, {**self._flags(p), "acquire": p.session}, p.value)

    def kv_release(self, p):
        return self._kv_put(p.key, {**self._flags(p), "release": p.session}, p.value)

    def kv_cas(self, p):
        return self._kv_put(p.key, {**self._flags(p), "cas": str(p.modify_index)}, p.value)

    def _kv_delete(self, key, params):
        status, _, data = self.do("DELETE", "/v1/kv/" + key, params)
        self._require_ok(status, data)
        return b"true" in data

    def kv_delete(self, key):
        self._kv_delete(key, {})

    def kv_delete_cas(self, p):
        return self._kv_delete(p.key, {"cas": str(p.modify_index)})

    # -- api/session.go --

    def session_create(self, name="", ttl="", behavior="", lock_delay=0.0):
        """Session.Create: only the fields that are set go into the body (a Go map, so its
        keys come out sorted)."""
        body = {}
        if lock_delay:
            body["LockDelay"] = dur_to_msec(lock_delay)
        if name:
            body["Name"] = name
        if behavior:
            body["Behavior"] = behavior
        if ttl:
            body["TTL"] = ttl
        # encodeBody uses a json.Encoder: compact, with a newline at the end.
        encoded = json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n"
        status, _, data = self.do("PUT", "/v1/session/create", body=encoded.encode())
        self._require_ok(status, data)
        return json.loads(data)["ID"]

    def session_destroy(self, sid):
        status, _, data = self.do("PUT", "/v1/session/destroy/" + sid)
        self._require_ok(status, data)

    def session_renew(self, sid):
        """Session.Renew: the entry, or None once the session is gone (404)."""
        status, _, data = self.do("PUT", "/v1/session/renew/" + sid)
        if status == 404:
            return None
        if status != 200:
            raise Exception(f"Unexpected response code: {status}")
        entries = json.loads(data)
        return entries[0] if entries else None

    def session_renew_periodic(self, initial_ttl, sid, done):
        """Session.RenewPeriodic: renew every TTL/2, every second after an error, give up once
        a whole TTL passed without a renewal; destroy the session when done is set."""
        ttl = parse_duration(initial_ttl) / 1e9
        wait = ttl / 2
        last_renew = time.monotonic()
        while True:
            if time.monotonic() - last_renew > ttl:
                return
            if done.wait(wait):
                try:
                    self.session_destroy(sid)
                except Exception:
                    pass
                return
            try:
                entry = self.session_renew(sid)
            except Exception:
                wait = 1.0
                continue
            if entry is None:
                return  # ErrSessionExpired
            ttl = parse_duration(entry["TTL"]) / 1e9
            wait = ttl / 2
            last_renew = time.monotonic()

    # -- api/agent.go --

    def agent_node_name(self):
        """Agent.NodeName, read from /v1/agent/self."""
        status, _, data = self.do("GET", "/v1/agent/self")
        self._require_ok(status, data)
        return json.loads(data)["Config"]["NodeName"]


def path_join(*elems):
    """Go's path.Join: empty elements vanish and the result is cleaned."""
    joined = "/".join(e for e in elems if e)
    if not joined:
        return ""
    cleaned = posixpath.normpath(joined)
    return cleaned[1:] if cleaned.startswith("//") else cleaned
