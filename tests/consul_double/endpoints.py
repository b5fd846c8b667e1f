"""The /v1 endpoints the double serves, answering as Consul's agent/*_endpoint.go handlers do
(their parse order, status codes, texts, headers and JSON layout). Transport and faults live in
netserver.py; this module only turns a Request into a Response."""

import base64
import dataclasses
import json
import urllib.parse

from acl import PermissionDenied
from godur import format_duration, parse_duration
from store import SECOND, SERF_CHECK, RpcError

SESSION_TTL_MAX = 24 * 3600 * SECOND   # structs.SessionTTLMax
DEFAULT_LOCK_DELAY = 15 * SECOND
LOCK_DELAY_MIN_THRESHOLD = 1000        # below this a number means seconds (lockDelayMinThreshold)
KV_MAX_VALUE_SIZE = 512 * 1024         # config kv_max_value_size
CONSUL_VERSION = "1.16.0"


@dataclasses.dataclass
class Request:
    method: str
    path: str                       # decoded, as Go's req.URL.Path
    query: dict                     # name -> [values], as Go's url.ParseQuery
    headers: object                 # email.message.Message
    body: bytes
    gone: object = lambda: False    # true once the client's connection is lost

    def arg(self, name):
        return self.query.get(name, [""])[0]

    def has(self, name):
        return name in self.query


@dataclasses.dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict = dataclasses.field(default_factory=dict)


class HttpError(Exception):
    def __init__(self, status, text):
        super().__init__(text)
        self.status = status


def go_json(obj, pretty=False):
    """encoding/json output: compact (or MarshalIndent with 4 spaces and a newline for
    ?pretty), UTF-8, with <, >, & and U+2028/9 escaped as Go does."""
    if pretty:
        text = json.dumps(obj, ensure_ascii=False, indent=4) + "\n"
    else:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text.encode()


def _ok(req, obj, headers=None):
    return Response(200, go_json(obj, req.has("pretty")),
                    {"Content-Type": "application/json", **(headers or {})})


class FaultIndex(int):
    """An index an index fault chose: sent as it is, even 0."""


def _meta(index, filtered=False):
    """setMeta: what every answer of a read endpoint carries."""
    sent = index if isinstance(index, FaultIndex) else max(index, 1)
    headers = {"X-Consul-Index": str(sent), "X-Consul-LastContact": "0",
               "X-Consul-KnownLeader": "true", "X-Consul-Query-Backend": "blocking-query"}
    if filtered:
        headers["X-Consul-Results-Filtered-By-ACLs"] = "true"
    return headers


def entry_json(e):
    """structs.DirEntry as JSON: Session is omitempty, an empty value is null."""
    out = {"LockIndex": e.lock_index, "Key": e.key, "Flags": e.flags,
           "Value": base64.b64encode(e.value).decode() if e.value else None}
    if e.session:
        out["Session"] = e.session
    out["CreateIndex"] = e.create_index
    out["ModifyIndex"] = e.modify_index
    return out


def session_json(s):
    """structs.Session as JSON; the deprecated Checks field is omitempty."""
    out = {"ID": s.id, "Name": s.name, "Node": s.node, "LockDelay": s.lock_delay,
           "Behavior": s.behavior, "TTL": s.ttl, "NodeChecks": s.node_checks,
           "ServiceChecks": s.service_checks}
    if s.checks:
        out["Checks"] = s.checks
    out["CreateIndex"] = s.create_index
    out["ModifyIndex"] = s.modify_index
    return out


# ---- Query options (agent/http.go parse, parseToken, parseConsistency, parseWait) --------------

@dataclasses.dataclass
class Options:
    dc: str
    token: str
    index: int = 0
    wait_ns: int = 0


def _token(req):
    if req.arg("token"):
        return req.arg("token")
    if req.headers.get("X-Consul-Token"):
        return req.headers.get("X-Consul-Token")
    parts = (req.headers.get("Authorization") or "").split(" ")
    if len(parts) > 1 and parts[0] == "Bearer":
        return " ".join(parts[1:]).strip().split(" ")[0].strip()
    return ""


def _dc_and_token(double, req):
    return Options(req.arg("dc") or double.datacenter, _token(req))


def _parse(double, req):
    opts = _dc_and_token(double, req)
    if req.has("stale") and req.has("consistent"):
        raise HttpError(400, "Cannot specify ?stale with ?consistent, conflicting semantics.")
    if req.arg("wait"):
        try:
            opts.wait_ns = parse_duration(req.arg("wait"))
        except ValueError:
            raise HttpError(400, "Invalid wait time") from None
    if req.arg("index"):
        opts.index = _uint(req.arg("index"), HttpError(400, "Invalid index"))
    return opts


def _uint(text, error):
    if not (text.isascii() and text.isdigit()) or int(text) >= 1 << 64:
        raise error
    return int(text)


def _parse_uint_param(req, name):
    """strconv.ParseUint failures are returned as plain errors, so they answer 500."""
    text = req.arg(name)
    return _uint(text, RpcError(f'strconv.ParseUint: parsing "{text}": invalid syntax'))


def _forward(double, opts):
    """Every RPC first goes to the datacenter asked for; the double knows no other."""
    if opts.dc != double.datacenter:
        raise RpcError("No path to datacenter")


def _route_rpc(double, opts):
    _forward(double, opts)
    return double.acl.resolve(opts.token)


def _blocking(double, req, opts, run):
    fault = double.faults.index_fault()
    if fault is not None and opts.index > 0:
        # A blocking query that does not block: the real entries at once, a made-up index.
        _, result = double.store.blocking_query(0, 0, run, req.gone)
        return FaultIndex(fault(opts.index)), result
    answer = double.store.blocking_query(opts.index, opts.wait_ns, run, req.gone)
    if answer is None:
        raise ConnectionAbortedError
    return answer


def _conflicting(req, *flags):
    if sum(req.has(f) for f in flags) > 1:
        encoded = urllib.parse.urlencode(sorted(
            (k, v) for k, vs in req.query.items() for v in vs))
        raise HttpError(400, f"Conflicting flags: {encoded}\n")


# ---- /v1/kv ---------------------------------------------------------------------------------

def kv(double, req):
    opts = _parse(double, req)
    key = req.path[len("/v1/kv/"):]
    if req.method == "GET":
        read = kv_keys if req.has("keys") else kv_get
        return read(double, req, opts, key)
    if req.method == "PUT":
        return kv_put(double, req, opts, key)
    return kv_delete(double, req, opts, key)


def kv_get(double, req, opts, key):
    recurse = req.has("recurse")
    if not recurse and not key:
        raise HttpError(400, "Missing key name")
    authz = _route_rpc(double, opts)
    store = double.store
    if recurse:
        def run():
            idx, entries = store.kv_list(key)
            readable = [e for e in entries if authz.can_read_key(e.key)]
            return idx, (readable, len(readable) != len(entries)), False
        index, (entries, filtered) = _blocking(double, req, opts, run)
    else:
        authz.key_read(key)

        def run():
            idx, entry = store.kv_get(key)
            return idx, ([entry] if entry else []), entry is None
        index, entries = _blocking(double, req, opts, run)
        filtered = False
    # An anonymous caller is not told that ACLs hid something (maskResultsFilteredByACLs).
    headers = _meta(index, filtered and bool(opts.token))
    if not entries:
        return Response(404, b"", headers)
    if req.has("raw") and not recurse:
        return Response(200, entries[0].value or b"", {
            **headers, "Content-Type": "text/plain", "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox"})
    return _ok(req, [entry_json(e) for e in entries], headers)


def kv_keys(double, req, opts, prefix):
    separator = req.arg("separator") if req.has("separator") else req.arg("seperator")
    authz = _route_rpc(double, opts)

    def run():
        idx, entries = double.store.kv_list(prefix)
        readable = [e for e in entries if authz.can_read_key(e.key)]
        keys = []
        for e in readable:
            cut = e.key.find(separator, len(prefix)) if separator else -1
            k = e.key if cut < 0 else e.key[:cut + len(separator)]
            if k not in keys:
                keys.append(k)
        return idx, (keys, len(readable) != len(entries)), False
    index, (keys, filtered) = _blocking(double, req, opts, run)
    headers = _meta(index, filtered and bool(opts.token))
    if not keys and prefix:
        return Response(404, b"", headers)
    return _ok(req, keys, headers)


def kv_put(double, req, opts, key):
    if not key:
        raise HttpError(400, "Missing key name")
    _conflicting(req, "cas", "acquire", "release")
    flags = _parse_uint_param(req, "flags") if req.has("flags") else 0
    value = req.body or None
    if len(req.body) > KV_MAX_VALUE_SIZE:
        raise HttpError(413, f"Request body({len(req.body)} bytes) too large, max size: "
                             f"{KV_MAX_VALUE_SIZE} bytes. See https://developer.hashicorp.com/"
                             "docs/agent/config/config-files#kv_max_value_size.")
    cas = _parse_uint_param(req, "cas") if req.has("cas") else None
    authz = _route_rpc(double, opts)
    authz.key_write(key)
    store = double.store
    if req.has("acquire"):
        done = store.kv_lock(key, value, flags, req.arg("acquire"))
    elif req.has("release"):
        done = store.kv_unlock(key, value, flags, req.arg("release"))
    elif cas is not None:
        done = store.kv_cas(key, value, flags, cas)
    else:
        done = store.kv_set(key, value, flags)
    return _ok(req, done)


def kv_delete(double, req, opts, key):
    _conflicting(req, "recurse", "cas")
    recurse = req.has("recurse")
    if not recurse and not key:
        raise HttpError(400, "Missing key name")
    cas = _parse_uint_param(req, "cas") if req.has("cas") else None
    authz = _route_rpc(double, opts)
    if recurse:
        authz.key_write_prefix(key)
        return _ok(req, double.store.kv_delete_tree(key))
    authz.key_write(key)
    if cas is not None:
        return _ok(req, double.store.kv_delete_cas(key, cas))
    return _ok(req, double.store.kv_delete(key))


# ---- /v1/session ----------------------------------------------------------------------------

_SESSION_FIELDS = {
    "name": ("Name", str, "string"), "node": ("Node", str, "string"),
    "behavior": ("Behavior", str, "structs.SessionBehavior"), "ttl": ("TTL", str, "string"),
    "checks": ("Checks", list, "[]types.CheckID"), "nodechecks": ("NodeChecks", list, "[]string"),
    "servicechecks": ("ServiceChecks", list, "[]structs.ServiceCheck"),
    "lockdelay": ("LockDelay", (str, int, float), "time.Duration"),
}


def _decode_session_body(body):
    """lib.DecodeJSON into structs.Session: names match case-insensitively, unknown fields are
    ignored, null empties a list and leaves anything else as it was, and LockDelay takes a
    duration string or a number of nanoseconds (small numbers meaning seconds)."""
    raw = json.loads(body)
    if not isinstance(raw, dict):
        raise ValueError("json: cannot unmarshal into Go value of type structs.Session")
    given = {}
    for key, value in raw.items():
        spec = _SESSION_FIELDS.get(key.lower())
        if spec is None:
            continue
        name, kind, go_type = spec
        if value is None:
            if kind is list:
                given[name] = None
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ValueError(f"json: cannot unmarshal {type(value).__name__} into Go struct "
                             f"field Session.{name} of type {go_type}")
        if name == "LockDelay":
            value = parse_duration(value) if isinstance(value, str) else int(value)
            if value < LOCK_DELAY_MIN_THRESHOLD:
                value *= SECOND
        given[name] = value
    return given


def session_create(double, req):
    opts = _dc_and_token(double, req)
    fields = {"Name": "", "Node": double.node, "LockDelay": DEFAULT_LOCK_DELAY,
              "Behavior": "release", "TTL": "", "Checks": [SERF_CHECK],
              "NodeChecks": [SERF_CHECK], "ServiceChecks": None}
    if req.body:
        try:
            fields.update(_decode_session_body(req.body))
        except ValueError as e:
            raise HttpError(400, f"Request decode failed: {e}") from None
    # fixupEmptySessionChecks: an explicit empty Checks list means no checks at all.
    if not fields["Checks"]:
        fields["NodeChecks"] = []
    elif fields["Checks"] == [SERF_CHECK]:
        fields["Checks"] = None
    elif not fields["NodeChecks"]:
        fields["Checks"] = None
    _forward(double, opts)
    if not fields["Node"]:
        raise RpcError("Must provide Node")
    double.acl.resolve(opts.token).session_write(fields["Node"])
    behavior = fields["Behavior"] or "release"
    if behavior not in ("release", "delete"):
        raise RpcError(f"Invalid Behavior setting '{behavior}'")
    ttl_ns = 0
    if fields["TTL"]:
        try:
            ttl_ns = parse_duration(fields["TTL"])
        except ValueError as e:
            raise RpcError(f"Session TTL '{fields['TTL']}' invalid: {e}") from None
        if ttl_ns != 0 and not double.session_ttl_min <= ttl_ns <= SESSION_TTL_MAX:
            raise RpcError(f"Invalid Session TTL '{ttl_ns}', must be between "
                           f"[{format_duration(double.session_ttl_min)}="
                           f"{format_duration(SESSION_TTL_MAX)}]")
    sid = double.store.session_create(
        fields["Name"], fields["Node"], fields["LockDelay"], behavior, fields["TTL"], ttl_ns,
        fields["NodeChecks"], fields["ServiceChecks"], fields["Checks"])
    return _ok(req, {"ID": sid})


def _session_id(req, prefix):
    sid = req.path[len(prefix):]
    if not sid:
        raise HttpError(400, "Missing session")
    return sid


def session_destroy(double, req):
    opts = _dc_and_token(double, req)
    sid = _session_id(req, "/v1/session/destroy/")
    authz = _route_rpc(double, opts)
    existing = double.store.session_lookup(sid)
    if existing is not None:
        authz.session_write(existing.node)
        double.store.session_destroy(sid)
    return _ok(req, True)


def session_renew(double, req):
    opts = _parse(double, req)
    sid = _session_id(req, "/v1/session/renew/")
    authz = _route_rpc(double, opts)
    existing = double.store.session_lookup(sid)
    if existing is not None:
        authz.session_write(existing.node)
        existing = double.store.session_renew(sid)
    if existing is None:
        raise HttpError(404, f"Session id '{sid}' not found")
    return _ok(req, [session_json(existing)])


def _sessions_query(double, req, opts, pick):
    authz = _route_rpc(double, opts)

    def run():
        idx, found, missing = pick()
        readable = [s for s in found if authz.can_read_session(s.node)]
        return idx, (readable, len(readable) != len(found)), missing
    index, (sessions, filtered) = _blocking(double, req, opts, run)
    return _ok(req, [session_json(s) for s in sessions],
               _meta(index, filtered and bool(opts.token)))


def session_info(double, req):
    opts = _parse(double, req)
    sid = _session_id(req, "/v1/session/info/")

    def pick():
        idx, s = double.store.session_get(sid)
        return idx, ([s] if s else []), s is None
    return _sessions_query(double, req, opts, pick)


def session_list(double, req):
    opts = _parse(double, req)
    return _sessions_query(double, req, opts, lambda: (*double.store.session_list(), False))


def session_node(double, req):
    opts = _parse(double, req)
    node = req.path[len("/v1/session/node/"):]
    if not node:
        raise HttpError(400, "Missing node name")
    return _sessions_query(double, req, opts,
                           lambda: (*double.store.session_list(node), False))


# ---- /v1/agent, /v1/status ----------------------------------------------------------------------

def agent_self(double, req):
    double.acl.resolve(_token(req)).agent_read(double.node)
    return _ok(req, {
        "Config": {"Datacenter": double.datacenter, "PrimaryDatacenter": double.datacenter,
                   "NodeName": double.node, "NodeID": double.node_id, "Revision": "",
                   "Server": True, "Version": CONSUL_VERSION},
        "DebugConfig": {},
        "Coord": None,
        "Member": {"Name": double.node, "Addr": "127.0.0.1", "Port": 8301,
                   # Go writes map keys in sorted order.
                   "Tags": {"build": CONSUL_VERSION, "dc": double.datacenter, "port": "8300",
                            "role": "consul", "vsn": "2", "vsn_max": "3", "vsn_min": "2"},
                   "Status": 1, "ProtocolMin": 1, "ProtocolMax": 5, "ProtocolCur": 2,
                   "DelegateMin": 2, "DelegateMax": 5, "DelegateCur": 4},
        "Stats": {},
        "Meta": {"consul-network-segment": ""},
    })


def status_leader(double, req):
    _route_rpc(double, _dc_and_token(double, req))
    return _ok(req, "127.0.0.1:8300")


def status_peers(double, req):
    _route_rpc(double, _dc_and_token(double, req))
    return _ok(req, ["127.0.0.1:8300"])


# Go ServeMux patterns: a trailing slash matches the subtree, otherwise the exact path.
ROUTES = [
    ("/v1/kv/", ("GET", "PUT", "DELETE"), kv),
    ("/v1/session/create", ("PUT",), session_create),
    ("/v1/session/destroy/", ("PUT",), session_destroy),
    ("/v1/session/renew/", ("PUT",), session_renew),
    ("/v1/session/info/", ("GET",), session_info),
    ("/v1/session/node/", ("GET",), session_node),
    ("/v1/session/list", ("GET",), session_list),
    ("/v1/agent/self", ("GET",), agent_self),
    ("/v1/status/leader", ("GET",), status_leader),
    ("/v1/status/peers", ("GET",), status_peers),
]


def handle(double, req):
    """Returns the Response, or raises ConnectionAbortedError when the connection went away
    while the request waited."""
    for pattern, methods, fn in ROUTES:
        if req.path == pattern or (pattern.endswith("/") and req.path.startswith(pattern)):
            break
    else:
        return Response(404)
    allow = ",".join(("OPTIONS",) + methods)
    if req.method == "OPTIONS":
        return Response(200, b"", {"Allow": allow})
    if req.method not in methods:
        return Response(405, f"method {req.method} not allowed".encode(), {"Allow": allow})
    try:
        return fn(double, req)
    except HttpError as e:
        return Response(e.status, str(e).encode())
    except PermissionDenied as e:
        return Response(403, str(e).encode())
    except RpcError as e:
        return Response(500, str(e).encode())
