"""Runs the Consul double for a test: a subprocess on free loopback ports in its own temporary
directory, a small client for its API, and its fault and observation controls.

    with ConsulDouble(unix=True) as consul:
        run_lock("-http-addr", consul.http_addr, ...)
        consul.partition(5)
"""

import base64
import http.client
import json
import os
import queue
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
DOUBLE = os.path.join(HERE, "consul_double.py")


class ConsulError(Exception):
    """A non-success answer from the API."""

    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


def make_test_pki(directory, client=True, server_usage="serverAuth"):
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and, if asked, a client
    certificate, made with the openssl command. Returns their paths by name: ca, server_cert,
    server_key and, with client, client_cert and client_key. etcd's gateway dials its own gRPC
    port with the server's certificate, which then needs "serverAuth,clientAuth"."""
    def path(name):
        return os.path.join(directory, name)

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *curve, "-keyout", path("ca.key"), "-out", path("ca.pem"),
            "-days", "2", "-subj", "/CN=consul-double test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    files = {"ca": path("ca.pem")}
    leaves = [("server", server_usage, "subjectAltName=IP:127.0.0.1,DNS:localhost,"
                                       "DNS:server.dc1.consul")]
    if client:
        leaves.append(("client", "clientAuth", "subjectAltName=DNS:client.dc1.consul"))
    for name, usage, san in leaves:
        with open(path(f"{name}.ext"), "w") as f:
            f.write(f"{san}\nextendedKeyUsage={usage}\nkeyUsage=critical,digitalSignature\n"
                    "basicConstraints=CA:FALSE\nsubjectKeyIdentifier=hash\n"
                    "authorityKeyIdentifier=keyid\n")
        openssl("req", *curve, "-keyout", path(f"{name}.key"), "-out", path(f"{name}.csr"),
                "-subj", f"/CN={name}.dc1.consul")
        openssl("x509", "-req", "-in", path(f"{name}.csr"), "-CA", path("ca.pem"),
                "-CAkey", path("ca.key"), "-CAcreateserial", "-days", "2",
                "-extfile", path(f"{name}.ext"), "-out", path(f"{name}.pem"))
        files[f"{name}_cert"] = path(f"{name}.pem")
        files[f"{name}_key"] = path(f"{name}.key")
    return files


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class ConsulDouble:
    """Context manager around one double process.

    Addresses for `lock`: http_addr ("127.0.0.1:PORT"), https_addr (with tls=True),
    unix_path (with unix=True). With tls=True, `pki` holds the CA and certificate paths
    (see make_test_pki); client_certs=True makes the server require a client certificate."""

    def __init__(self, *, unix=False, tls=False, client_certs=False, acl=None,
                 ttl_multiplier=1.0, session_ttl_min=None, start_timeout=15.0):
        self._options = dict(unix=unix, tls=tls or client_certs, client_certs=client_certs,
                             acl=acl, ttl_multiplier=ttl_multiplier,
                             session_ttl_min=session_ttl_min)
        self._start_timeout = start_timeout
        self.tmpdir = None
        self.proc = None
        self.http_addr = self.https_addr = self.unix_path = self.control_addr = None
        self.pki = None

    # ---- lifetime -----------------------------------------------------------------------------

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        o = self._options
        self.tmpdir = tempfile.mkdtemp(prefix="consul-double-")
        args = [sys.executable, DOUBLE, "--listen", "127.0.0.1:0",
                "--ttl-multiplier", str(o["ttl_multiplier"])]
        if o["session_ttl_min"]:
            args += ["--session-ttl-min", o["session_ttl_min"]]
        if o["unix"]:
            args += ["--unix", os.path.join(self.tmpdir, "consul.sock")]
        if o["tls"]:
            self.pki = make_test_pki(self.tmpdir, client=o["client_certs"])
            args += ["--tls-cert", self.pki["server_cert"], "--tls-key", self.pki["server_key"]]
            if o["client_certs"]:
                args += ["--tls-client-ca", self.pki["ca"]]
        if o["acl"] is not None:
            acl_path = os.path.join(self.tmpdir, "acl.json")
            with open(acl_path, "w") as f:
                json.dump(o["acl"], f)
            args += ["--acl", acl_path]
        self._stderr = open(os.path.join(self.tmpdir, "double.log"), "w")
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True)
        lines = queue.Queue()

        def read_lines(out):
            for line in out:
                lines.put(line)
            lines.put("")
        threading.Thread(target=read_lines, args=(self.proc.stdout,), daemon=True).start()
        while self.control_addr is None:
            try:
                line = lines.get(timeout=self._start_timeout)
            except queue.Empty:
                raise RuntimeError("the Consul double did not come up") from None
            if not line:
                raise RuntimeError(f"the Consul double exited: {self.log()}")
            kind, _, where = line.strip().partition(" ")
            setattr(self, {"http": "http_addr", "https": "https_addr", "unix": "unix_path",
                           "control": "control_addr"}[kind], where)

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.stdin.close()
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc.stdout.close()
            self._stderr.close()
            self.proc = None
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None

    def log(self):
        with open(os.path.join(self.tmpdir, "double.log")) as f:
            return f.read()

    # ---- raw HTTP -------------------------------------------------------------------------------

    def tls_context(self, client_cert=True):
        ctx = ssl.create_default_context(cafile=self.pki["ca"])
        if client_cert and "client_cert" in self.pki:
            ctx.load_cert_chain(self.pki["client_cert"], self.pki["client_key"])
        return ctx

    def connection(self, via="http", timeout=30.0):
        """A fresh http.client connection to the API: via "http", "https" or "unix"."""
        if via == "unix":
            return _UnixConnection(self.unix_path, timeout)
        if via == "https":
            host, port = self.https_addr.rsplit(":", 1)
            return http.client.HTTPSConnection(host, int(port), timeout=timeout,
                                               context=self.tls_context())
        host, port = self.http_addr.rsplit(":", 1)
        return http.client.HTTPConnection(host, int(port), timeout=timeout)

    def request(self, method, path, body=None, token=None, headers=None, via="http",
                timeout=30.0):
        """Returns (status, headers, body bytes)."""
        conn = self.connection(via, timeout)
        try:
            hdrs = dict(headers or {})
            if token:
                hdrs["X-Consul-Token"] = token
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, resp.headers, resp.read()
        finally:
            conn.close()

    @staticmethod
    def path(base, key="", **params):
        """URL path with Consul-style parameters: True gives a bare flag (?recurse)."""
        query = "&".join(k if v is True else f"{k}={urllib.parse.quote(str(v), safe='')}"
                         for k, v in params.items() if v is not None and v is not False)
        return base + urllib.parse.quote(key) + ("?" + query if query else "")

    def _json(self, method, path, body=None, token=None, ok=(200,)):
        status, _, data = self.request(method, path, body, token)
        if status not in ok:
            raise ConsulError(status, data.decode(errors="replace"))
        return json.loads(data) if status == 200 else None

    # ---- KV and sessions ----------------------------------------------------------------------

    def get(self, key, token=None, **params):
        """The key's entries (a list, one entry unless recurse=True), or None on 404. Values are
        decoded from base64 into bytes."""
        entries = self._json("GET", self.path("/v1/kv/", key, **params), token=token,
                             ok=(200, 404))
        for e in entries or []:
            e["Value"] = base64.b64decode(e["Value"]) if e["Value"] is not None else None
        return entries

    def put(self, key, value=b"", token=None, **params):
        return self._json("PUT", self.path("/v1/kv/", key, **params), value, token)

    def delete(self, key, token=None, **params):
        return self._json("DELETE", self.path("/v1/kv/", key, **params), token=token)

    def kv_all(self, token=None):
        return self.get("", token=token, recurse=True) or []

    def session_create(self, token=None, **fields):
        return self._json("PUT", "/v1/session/create", json.dumps(fields), token)["ID"]

    def session_destroy(self, session_id, token=None):
        return self._json("PUT", f"/v1/session/destroy/{session_id}", token=token)

    def session_renew(self, session_id, token=None):
        """The renewed session, or None when it is gone (404)."""
        found = self._json("PUT", f"/v1/session/renew/{session_id}", token=token, ok=(200, 404))
        return found[0] if found else None

    def session_info(self, session_id, token=None):
        found = self._json("GET", f"/v1/session/info/{session_id}", token=token)
        return found[0] if found else None

    def sessions(self, token=None):
        return self._json("GET", "/v1/session/list", token=token)

    # ---- faults and observation -----------------------------------------------------------------

    def control(self, verb, route, **args):
        host, port = self.control_addr.rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        try:
            conn.request(verb, route, body=json.dumps(args),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = json.loads(resp.read())
            if resp.status != 200:
                raise ConsulError(resp.status, data)
            return data
        finally:
            conn.close()

    def fail_5xx(self, seconds, status=500, body="No cluster leader", headers=None):
        """Requests arriving in the next `seconds` get this answer; blocking queries already
        waiting go on as on a real server (drop_connections() cuts them)."""
        self.control("POST", "/fault/5xx", seconds=seconds, status=status, body=body,
                     headers=headers or {})

    def reply_fault(self, path, *, method=None, prefix=False, query=None, times=1,
                    seconds=None, mode="reply", status=200, body="", headers=None,
                    hang_seconds=3600, delay_seconds=0):
        """The next `times` requests (None: all, for `seconds` if given) whose method, raw path
        (or path prefix) and raw query (a substring) match get, instead of the real answer:
        mode "reply": this status, body and headers, delay_seconds after the request came;
        "endless": a 200 whose body never ends;
        "hang": no answer for hang_seconds (or until heal()), then a dropped connection."""
        self.control("POST", "/fault/reply", method=method, path=path, prefix=prefix,
                     query=query, times=times, seconds=seconds, mode=mode, status=status,
                     body=body, headers=headers or {}, hang_seconds=hang_seconds,
                     delay_seconds=delay_seconds)

    def index_fault(self, mode, seconds):
        """For `seconds`, blocking queries answer at once with the real entries and an index
        made by `mode`: "unchanged" (the one asked with), "backwards" (one less), "zero", or
        "spurious" (one more, with nothing changed)."""
        self.control("POST", "/fault/index", mode=mode, seconds=seconds)

    def partition(self, seconds):
        self.control("POST", "/fault/partition", seconds=seconds)

    def heal(self):
        self.control("POST", "/fault/heal")

    def drop_connections(self):
        self.control("POST", "/fault/drop")

    def restart(self, down_seconds):
        """Returns once the API is down; it comes back after down_seconds (see wait_up)."""
        self.control("POST", "/fault/restart", down_seconds=down_seconds)

    def wait_up(self, timeout=15.0):
        """Waits for the API to be back after restart(); False if it is not within timeout."""
        return self.control("POST", "/wait/up", timeout=timeout)["up"]

    def pause_ttl(self):
        self.control("POST", "/ttl/pause")

    def set_check(self, check, status):
        """An agent check on the double's node: "passing", "warning" or "critical"."""
        self.control("POST", "/check", id=check, status=status)

    def resume_ttl(self):
        self.control("POST", "/ttl/resume")

    def requests(self):
        """Every API request seen: seq, at (time.monotonic() on arrival, comparable with the
        test's own), listener, connection (a number shared by one connection's requests), method,
        path and query (raw, as sent) and headers (names in lower case)."""
        return self.control("GET", "/requests")["requests"]

    def request_count(self):
        return self.control("GET", "/requests")["count"]

    def clear_requests(self):
        self.control("DELETE", "/requests")
