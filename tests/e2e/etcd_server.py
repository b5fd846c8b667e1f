"""A real etcd server for the tests: Debian's etcd on free loopback ports, in a temporary data
directory, stopped (by its own PID) when the test class is done."""

import base64
import collections
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import tempfile
import urllib.request

from harness import LockTestCase, free_port, wait_for

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"


class EtcdServer:
    """With `pki` (paths of a CA, a server certificate and key, a client certificate and key, as
    make_test_pki in tests/consul_double/fixture.py makes them), clients must use TLS and show a
    certificate signed by that CA."""

    def __init__(self, pki=None):
        self.dir = tempfile.mkdtemp(prefix="lock-etcd-")
        self.proc = None
        self.url = None
        self.pki = pki
        self.token = None  # once a test enables auth
        self.context = None
        if pki:
            self.context = ssl.create_default_context(cafile=pki["ca"])
            self.context.load_cert_chain(pki["client_cert"], pki["client_key"])

    def __enter__(self):
        for _ in range(5):  # a port picked as free may be taken before etcd binds it
            client, peer = free_port(), free_port()
            self.url = f"{'https' if self.pki else 'http'}://127.0.0.1:{client}"
            peer_url = f"http://127.0.0.1:{peer}"
            self.log = open(os.path.join(self.dir, "etcd.log"), "w")
            self.proc = subprocess.Popen(
                [ETCD, "--name", "test", "--data-dir", os.path.join(self.dir, "data"),
                 "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                 "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                 "--initial-cluster", f"test={peer_url}", *self.tls_flags()],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
            if wait_for(lambda: self.proc.poll() is not None or self.healthy(), 30, "etcd to start") \
                    and self.proc.poll() is None:
                return self
            self.log.close()
        raise RuntimeError(f"etcd did not start; see {self.dir}/etcd.log")

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # in case a test left it paused
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def tls_flags(self):
        if not self.pki:
            return []
        return ["--cert-file", self.pki["server_cert"], "--key-file", self.pki["server_key"],
                "--trusted-ca-file", self.pki["ca"], "--client-cert-auth"]

    def healthy(self):
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1, context=self.context) as r:
                return json.load(r).get("health") == "true"
        except OSError:
            return False

    def call(self, path, body, token=None):
        """One JSON gateway call, e.g. call("/v3/kv/range", {...})."""
        req = urllib.request.Request(self.url + path, json.dumps(body).encode(), method="POST")
        if token or self.token:
            req.add_header("Authorization", token or self.token)
        with urllib.request.urlopen(req, timeout=10, context=self.context) as r:
            return json.load(r)

    def keys(self, prefix=""):
        """Every key (below `prefix`), as {key: (value, create_revision, lease)}."""
        start = prefix.encode()
        end = start[:-1] + bytes([start[-1] + 1]) if start else b"\0"
        reply = self.call("/v3/kv/range", {"key": b64(start), "range_end": b64(end)})
        return {base64.b64decode(kv["key"]).decode(): (base64.b64decode(kv.get("value", "")).decode(),
                                                       int(kv["create_revision"]),
                                                       int(kv.get("lease", 0)))
                for kv in reply.get("kvs", [])}

    def leases(self):
        return [int(l["ID"]) for l in self.call("/v3/lease/leases", {}).get("leases", [])]

    def revoke(self, lease):
        self.call("/v3/lease/revoke", {"ID": str(lease)})

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def etcdctl(self, *args):
        """The command line of an etcdctl; env() tells it where this server is."""
        return [ETCDCTL, *args]

    def env(self, base):
        return dict(base, ETCDCTL_API="3", LOCK_BACKEND="etcd", ETCDCTL_ENDPOINTS=self.url)


def grpc_calls(url):
    """etcd's count of the calls it started, by method: the JSON gateway's requests become the
    same gRPC calls as etcdctl's, so both tools are counted alike."""
    with urllib.request.urlopen(url + "/metrics") as r:
        text = r.read().decode()
    calls = collections.Counter()
    for m in re.finditer(r'^grpc_server_started_total\{grpc_method="(\w+)"[^}]*\} (\d+)$', text, re.M):
        calls[m.group(1)] += int(m.group(2))
    return calls


def b64(data):
    return base64.b64encode(data).decode()


class EtcdTestCase(LockTestCase):
    @classmethod
    def setUpClass(cls):
        cls.etcd = EtcdServer().__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.etcd.__exit__(None, None, None)

    def setUp(self):
        super().setUp()
        self.env = self.etcd.env(self.env)
        self.prefix = self.id().rsplit(".", 1)[1]  # a prefix of its own for each test
        # etcdctl lock leaves its leases to expire; the checks below ignore those of earlier tests.
        self.leases_before = set(self.etcd.leases())

    def assert_nothing_left(self):
        wait_for(lambda: not self.etcd.keys(self.prefix + "/") and
                 not set(self.etcd.leases()) - self.leases_before,
                 what="no key and no lease to be left")

    def start_etcdctl(self, *args, **kwargs):
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        p = subprocess.Popen(self.etcd.etcdctl(*args), env=self.env, text=True, **kwargs)
        self.procs.append(p)
        return p
