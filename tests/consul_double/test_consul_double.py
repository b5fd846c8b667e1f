"""The Consul double's own rules, one test per documented rule, and the Go-client peer built on
it. Waits are event-driven or polled with a deadline; the few sleeps let a TTL or lock-delay
pass when that passing is what the test is about."""

import http.client
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from fixture import ConsulDouble, ConsulError

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "consul_peer.py")
PEER_ENV = dict(os.environ, SHELL="/bin/sh")


def wait_for(condition, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


class Background(threading.Thread):
    """Runs a call in a thread and keeps its result or exception."""

    def __init__(self, fn):
        super().__init__(daemon=True)
        self.fn, self.result, self.error = fn, None, None
        self.start()

    def run(self):
        try:
            self.result = self.fn()
        except Exception as e:  # kept for the test to inspect
            self.error = e

    def outcome(self, timeout=15.0):
        self.join(timeout)
        if self.is_alive():
            raise AssertionError("background call did not finish")
        return self.result


class DoubleCase(unittest.TestCase):
    """One double per class; each test writes under its own key prefix."""
    options = {}

    @classmethod
    def setUpClass(cls):
        cls.consul = ConsulDouble(**cls.options).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.consul.__exit__(None, None, None)

    def setUp(self):
        self.c = self.consul
        self.prefix = self.id().rsplit(".", 1)[-1] + "/"

    def k(self, name):
        return self.prefix + name

    def raw(self, method, path, body=None, **kw):
        status, headers, data = self.c.request(method, path, body, **kw)
        return status, headers, data.decode()

    def index(self, path):
        return int(self.c.request("GET", path)[1]["X-Consul-Index"])


class SessionTests(DoubleCase):
    def test_create_defaults(self):
        s = self.c.session_info(self.c.session_create())
        self.assertEqual(s["LockDelay"], 15_000_000_000)
        self.assertEqual((s["Behavior"], s["Node"], s["TTL"]), ("release", "consul-double", ""))
        self.assertEqual((s["NodeChecks"], s["ServiceChecks"]), (["serfHealth"], None))
        self.assertNotIn("Checks", s)  # omitted when serfHealth is the only check
        self.assertEqual(s["CreateIndex"], s["ModifyIndex"])
        self.assertEqual(list(s), ["ID", "Name", "Node", "LockDelay", "Behavior", "TTL",
                                   "NodeChecks", "ServiceChecks", "CreateIndex", "ModifyIndex"])

    def test_lock_delay_as_duration_or_nanoseconds(self):
        for given, ns in (("5s", 5e9), (5, 5e9), (2_000_000_000, 2e9), (0, 0), ("250ms", 2.5e8)):
            s = self.c.session_info(self.c.session_create(LockDelay=given))
            self.assertEqual(s["LockDelay"], ns, given)

    def test_ttl_bounds_and_wording(self):
        for ttl in ("10s", "24h", "0s", "1h30m"):
            self.c.session_create(TTL=ttl)
        for ttl, ns in (("9s", 9_000_000_000), ("24h0m1s", 86_401_000_000_000)):
            with self.assertRaises(ConsulError) as e:
                self.c.session_create(TTL=ttl)
            self.assertEqual((e.exception.status, e.exception.body),
                             (500, f"Invalid Session TTL '{ns}', must be between [10s=24h0m0s]"))
        with self.assertRaises(ConsulError) as e:
            self.c.session_create(TTL="abc")
        self.assertEqual(e.exception.body,
                         'Session TTL \'abc\' invalid: time: invalid duration "abc"')

    def test_invalid_behavior_body_and_node(self):
        cases = [({"Behavior": "explode"}, 500, "Invalid Behavior setting 'explode'"),
                 ({"Node": "elsewhere"}, 500, "apply failed: Missing node registration")]
        for fields, status, text in cases:
            with self.assertRaises(ConsulError) as e:
                self.c.session_create(**fields)
            self.assertEqual((e.exception.status, e.exception.body), (status, text))
        status, _, body = self.raw("PUT", "/v1/session/create", b"{not json")
        self.assertEqual(status, 400)
        self.assertTrue(body.startswith("Request decode failed: "), body)

    def test_checks_are_accepted(self):
        s = self.c.session_info(self.c.session_create(Checks=[]))
        self.assertEqual(s["NodeChecks"], [])
        self.c.set_check("web", "passing")
        s = self.c.session_info(self.c.session_create(Checks=["serfHealth", "web"]))
        self.assertEqual(s["Checks"], ["serfHealth", "web"])
        self.c.session_create(NodeChecks=["serfHealth"], ServiceChecks=[{"ID": "web"}])

    def test_a_session_needs_its_checks_registered_and_not_critical(self):
        with self.assertRaises(ConsulError) as e:
            self.c.session_create(Checks=["db"], NodeChecks=["db"])
        self.assertEqual((e.exception.status, e.exception.body),
                         (500, "apply failed: Missing check 'db' registration"))
        self.c.set_check("db", "critical")
        with self.assertRaises(ConsulError) as e:
            self.c.session_create(Checks=["db"], NodeChecks=["db"])
        self.assertEqual(e.exception.body, "apply failed: Check 'db' is in critical state")

    def test_a_check_gone_critical_invalidates_its_sessions(self):
        self.c.set_check("web", "passing")
        tied = self.c.session_create(Checks=["web"], NodeChecks=["web"])
        free = self.c.session_create(Checks=[])
        self.assertTrue(self.c.put("k", b"v", acquire=tied))
        self.c.set_check("web", "warning")
        self.assertIsNotNone(self.c.session_info(tied))
        self.c.set_check("web", "critical")
        self.assertIsNone(self.c.session_info(tied))
        self.assertIsNotNone(self.c.session_info(free))
        self.assertNotIn("Session", self.c.get("k")[0])

    def test_renew_destroy_info_list(self):
        sid = self.c.session_create(Name="worker", TTL="15s")
        renewed = self.c.session_renew(sid)
        self.assertEqual((renewed["ID"], renewed["Name"], renewed["TTL"]), (sid, "worker", "15s"))
        self.assertIn(sid, [s["ID"] for s in self.c.sessions()])
        status, _, body = self.raw("GET", "/v1/session/node/consul-double")
        self.assertIn(sid, body)
        self.assertIs(self.c.session_destroy(sid), True)
        self.assertIsNone(self.c.session_info(sid))
        self.assertNotIn(sid, [s["ID"] for s in self.c.sessions()])
        status, _, body = self.raw("PUT", f"/v1/session/renew/{sid}")
        self.assertEqual((status, body), (404, f"Session id '{sid}' not found"))
        self.assertIs(self.c.session_destroy(sid), True)  # idempotent
        self.assertEqual(self.raw("PUT", "/v1/session/destroy/")[::2], (400, "Missing session"))

    def test_session_info_carries_query_meta(self):
        sid = self.c.session_create()
        status, headers, _ = self.raw("GET", f"/v1/session/info/{sid}")
        self.assertEqual(int(headers["X-Consul-Index"]), self.c.session_info(sid)["CreateIndex"])
        self.assertEqual(headers["X-Consul-KnownLeader"], "true")


class TtlTests(DoubleCase):
    # Consul's session_ttl_min, lowered so that expiry takes a second, not ten.
    options = {"session_ttl_min": "1s"}

    def test_expiry_is_a_lower_bound_and_releases_keys(self):
        before = time.monotonic()
        sid = self.c.session_create(TTL="1s", LockDelay="0s")
        self.assertTrue(self.c.put(self.k("held"), b"v", acquire=sid))
        wait_for(lambda: self.c.session_info(sid) is None, 5, "the session to expire")
        self.assertGreaterEqual(time.monotonic() - before, 1.0)
        entry = self.c.get(self.k("held"))[0]
        self.assertNotIn("Session", entry)
        self.assertEqual((entry["LockIndex"], entry["Value"]), (1, b"v"))

    def test_renew_restarts_the_ttl(self):
        sid = self.c.session_create(TTL="1s")
        time.sleep(0.6)  # most of the TTL passes
        self.assertIsNotNone(self.c.session_renew(sid))
        time.sleep(0.6)  # past the first deadline, not the renewed one
        self.assertIsNotNone(self.c.session_info(sid))
        wait_for(lambda: self.c.session_info(sid) is None, 5, "the renewed session to expire")

    def test_pause_holds_expiry(self):
        self.c.pause_ttl()
        try:
            sid = self.c.session_create(TTL="1s")
            time.sleep(1.3)  # past the TTL while paused
            self.assertIsNotNone(self.c.session_info(sid))
        finally:
            self.c.resume_ttl()
        wait_for(lambda: self.c.session_info(sid) is None, 2, "expiry once resumed")


class TtlMultiplierTests(DoubleCase):
    options = {"session_ttl_min": "1s", "ttl_multiplier": 2.0}

    def test_expiry_waits_ttl_times_multiplier(self):
        before = time.monotonic()
        sid = self.c.session_create(TTL="1s")
        wait_for(lambda: self.c.session_info(sid) is None, 6, "the session to expire")
        self.assertGreaterEqual(time.monotonic() - before, 2.0)


class KvTests(DoubleCase):
    def session(self, **fields):
        return self.c.session_create(**fields)

    def test_release_behavior_clears_session_and_bumps_index(self):
        sid = self.session()
        key = self.k("lock")
        self.c.put(key, b"v", acquire=sid)
        before = self.c.get(key)[0]
        self.c.session_destroy(sid)
        after = self.c.get(key)[0]
        self.assertNotIn("Session", after)
        self.assertEqual((after["LockIndex"], after["Value"]), (before["LockIndex"], b"v"))
        self.assertGreater(after["ModifyIndex"], before["ModifyIndex"])

    def test_delete_behavior_removes_keys(self):
        sid = self.session(Behavior="delete")
        self.c.put(self.k("eph"), b"v", acquire=sid)
        self.c.session_destroy(sid)
        self.assertIsNone(self.c.get(self.k("eph")))

    def test_lock_delay_blocks_acquire_after_invalidation(self):
        key = self.k("lock")
        first, second = self.session(LockDelay="1s"), self.session()
        self.c.put(key, acquire=first)
        invalidated = time.monotonic()
        self.c.session_destroy(first)
        self.assertFalse(self.c.put(key, acquire=second))
        wait_for(lambda: self.c.put(key, acquire=second), 5, "the lock-delay to end")
        self.assertGreaterEqual(time.monotonic() - invalidated, 1.0)

    def test_release_starts_no_lock_delay(self):
        key = self.k("lock")
        first, second = self.session(LockDelay="30s"), self.session()
        self.c.put(key, acquire=first)
        self.assertTrue(self.c.put(key, release=first))
        self.assertTrue(self.c.put(key, acquire=second))

    def test_lock_index_rules(self):
        key = self.k("lock")
        a, b = self.session(), self.session()
        self.assertTrue(self.c.put(key, b"1", acquire=a))
        self.assertEqual(self.c.get(key)[0]["LockIndex"], 1)
        self.assertTrue(self.c.put(key, b"2", acquire=a))  # re-acquire: contents only
        e = self.c.get(key)[0]
        self.assertEqual((e["LockIndex"], e["Value"], e["Session"]), (1, b"2", a))
        self.assertFalse(self.c.put(key, acquire=b))
        self.assertFalse(self.c.put(key, release=b))  # not the holder
        self.assertTrue(self.c.put(key, b"3", release=a))  # the release writes its body too
        e = self.c.get(key)[0]
        self.assertEqual((e["LockIndex"], e["Value"]), (1, b"3"))
        self.assertTrue(self.c.put(key, acquire=b))
        self.assertEqual(self.c.get(key)[0]["LockIndex"], 2)

    def test_plain_put_keeps_the_holder(self):
        key = self.k("lock")
        sid = self.session()
        self.c.put(key, acquire=sid)
        self.c.put(key, b"overwritten")
        e = self.c.get(key)[0]
        self.assertEqual((e["Session"], e["Value"], e["LockIndex"]), (sid, b"overwritten", 0))

    def test_acquire_with_invalid_session(self):
        status, _, body = self.raw("PUT", f"/v1/kv/{self.k('x')}?acquire=nope")
        self.assertEqual((status, body), (500, 'raft apply failed: invalid session "nope"'))

    def test_cas(self):
        key = self.k("cas")
        self.assertTrue(self.c.put(key, b"1", cas=0))
        self.assertFalse(self.c.put(key, b"2", cas=0))  # 0 means create-only
        index = self.c.get(key)[0]["ModifyIndex"]
        self.assertFalse(self.c.put(key, b"2", cas=index + 100))
        self.assertTrue(self.c.put(key, b"2", cas=index))
        self.assertEqual(self.c.get(key)[0]["Value"], b"2")

    def test_delete_cas(self):
        key = self.k("cas")
        self.c.put(key, b"1")
        index = self.c.get(key)[0]["ModifyIndex"]
        self.assertFalse(self.c.delete(key, cas=index + 1))
        self.assertTrue(self.c.delete(key, cas=index))
        self.assertIsNone(self.c.get(key))
        self.assertTrue(self.c.delete(key, cas=index))  # nothing left to mismatch

    def test_missing_key_is_404_with_index(self):
        self.c.put(self.k("present"), b"x")
        status, headers, body = self.raw("GET", f"/v1/kv/{self.k('absent')}")
        self.assertEqual((status, body), (404, ""))
        self.assertEqual(int(headers["X-Consul-Index"]),
                         self.c.get(self.k("present"))[0]["ModifyIndex"])

    def test_entry_layout_flags_and_null_value(self):
        self.c.put(self.k("f"), flags=0xE0F69A2BAA414DE0)
        status, _, body = self.raw("GET", f"/v1/kv/{self.k('f')}")
        self.assertRegex(body, r'^\[\{"LockIndex":0,"Key":"[^"]+","Flags":16210313421097356768,'
                               r'"Value":null,"CreateIndex":\d+,"ModifyIndex":\d+\}\]$')

    def test_unchanged_write_keeps_modify_index(self):
        self.c.put(self.k("same"), b"v")
        first = self.c.get(self.k("same"))[0]["ModifyIndex"]
        self.c.put(self.k("same"), b"v")
        self.assertEqual(self.c.get(self.k("same"))[0]["ModifyIndex"], first)

    def test_recurse_keys_raw_and_delete_tree(self):
        for name in ("b/2", "a", "b/1"):
            self.c.put(self.k(name), name.encode())
        self.assertEqual([e["Key"] for e in self.c.get(self.prefix, recurse=True)],
                         [self.k("a"), self.k("b/1"), self.k("b/2")])
        status, _, body = self.raw("GET", f"/v1/kv/{self.prefix}?keys&separator=/")
        self.assertEqual(json.loads(body), [self.k("a"), self.k("b/")])
        self.assertEqual(self.raw("GET", f"/v1/kv/{self.k('a')}?raw")[::2], (200, "a"))
        self.assertTrue(self.c.delete(self.k("b/"), recurse=True))
        self.assertEqual([e["Key"] for e in self.c.get(self.prefix, recurse=True)], [self.k("a")])

    def test_read_headers(self):
        self.c.put(self.k("h"), b"x")
        _, headers, _ = self.raw("GET", f"/v1/kv/{self.k('h')}")
        self.assertEqual((headers["X-Consul-KnownLeader"], headers["X-Consul-LastContact"]),
                         ("true", "0"))

    def test_request_errors(self):
        key = self.k("x")
        cases = [
            ("GET", f"/v1/kv/{key}?dc=dc1", 404, ""),
            ("GET", f"/v1/kv/{key}?dc=dc9", 500, "No path to datacenter"),
            ("GET", f"/v1/kv/{key}?stale&consistent", 400,
             "Cannot specify ?stale with ?consistent, conflicting semantics."),
            ("GET", f"/v1/kv/{key}?index=1&wait=soon", 400, "Invalid wait time"),
            ("GET", f"/v1/kv/{key}?index=x", 400, "Invalid index"),
            ("GET", "/v1/kv/", 400, "Missing key name"),
            ("PUT", f"/v1/kv/{key}?cas=0&acquire=a", 400, "Conflicting flags: acquire=a&cas=0\n"),
            ("POST", f"/v1/kv/{key}", 405, "method POST not allowed"),
            ("GET", "/v1/nothing", 404, ""),
        ]
        for method, path, status, body in cases:
            self.assertEqual(self.raw(method, path)[::2], (status, body), path)

    def test_keep_alive(self):
        conn = self.c.connection()
        try:
            sockets = []
            for _ in range(2):
                conn.request("GET", "/v1/status/leader")
                self.assertEqual(conn.getresponse().read(), b'"127.0.0.1:8300"')
                sockets.append(conn.sock)
            self.assertIs(sockets[0], sockets[1])  # the second request reused the connection
        finally:
            conn.close()

    def test_agent_self(self):
        body = json.loads(self.raw("GET", "/v1/agent/self")[2])
        self.assertEqual((body["Config"]["Datacenter"], body["Config"]["NodeName"]),
                         ("dc1", "consul-double"))
        self.assertEqual(body["Member"]["Name"], "consul-double")


class BlockingTests(DoubleCase):
    def blocked(self, path):
        """Starts a blocking GET and returns once the double holds it."""
        seen = max((r["seq"] for r in self.c.requests()), default=0)
        call = Background(lambda: self.raw("GET", path))
        wait_for(lambda: any(r["seq"] > seen and r["path"] + "?" + r["query"] == path
                             for r in self.c.requests()), 5, "the double to get the query")
        return call

    def test_key_query_wakes_on_that_key_only(self):
        key = self.k("watched")
        self.c.put(key, b"1")
        index = self.index(f"/v1/kv/{key}")
        call = self.blocked(f"/v1/kv/{key}?index={index}&wait=10s")
        self.c.put(self.k("other"), b"x")
        self.c.put(key, b"2")
        status, headers, body = call.outcome()
        self.assertEqual(status, 200)
        self.assertEqual(int(headers["X-Consul-Index"]), self.c.get(key)[0]["ModifyIndex"])
        self.assertIn('"Value":"Mg=="', body)

    def test_prefix_query_wakes_on_change_below_it(self):
        self.c.put(self.k("dir/a"), b"1")
        index = self.index(f"/v1/kv/{self.k('dir/')}?recurse")
        call = self.blocked(f"/v1/kv/{self.k('dir/')}?recurse&index={index}&wait=10s")
        self.c.put(self.k("elsewhere"), b"x")
        self.c.delete(self.k("dir/a"))
        status, headers, _ = call.outcome()
        self.assertEqual(status, 404)  # the delete emptied the prefix
        self.assertGreater(int(headers["X-Consul-Index"]), index)

    def test_missing_key_query_waits_for_the_key(self):
        key = self.k("later")
        index = self.index(f"/v1/kv/{key}")
        call = self.blocked(f"/v1/kv/{key}?index={index}&wait=10s")
        self.c.put(self.k("unrelated"), b"x")  # raises the table index, not the answer
        self.c.put(key, b"here")
        status, _, body = call.outcome()
        self.assertEqual(status, 200)
        self.assertIn('"Value":"aGVyZQ=="', body)

    def test_query_times_out_at_wait(self):
        key = self.k("still")
        self.c.put(key, b"1")
        index = self.index(f"/v1/kv/{key}")
        start = time.monotonic()
        status, headers, _ = self.raw("GET", f"/v1/kv/{key}?index={index}&wait=300ms")
        took = time.monotonic() - start
        self.assertEqual((status, int(headers["X-Consul-Index"])), (200, index))
        self.assertGreaterEqual(took, 0.3)
        self.assertLess(took, 0.3 * 17 / 16 + 1.0)  # wait plus at most wait/16 of jitter

    def test_index_zero_and_future_index(self):
        key = self.k("k")
        self.c.put(key, b"1")
        start = time.monotonic()
        self.assertEqual(self.raw("GET", f"/v1/kv/{key}?index=0&wait=10s")[0], 200)
        self.assertLess(time.monotonic() - start, 5)
        index = self.index(f"/v1/kv/{key}")
        start = time.monotonic()
        status, headers, _ = self.raw("GET", f"/v1/kv/{key}?index={index + 1000}&wait=200ms")
        self.assertGreaterEqual(time.monotonic() - start, 0.2)  # no answer before the wait
        self.assertEqual(int(headers["X-Consul-Index"]), index)

    def test_session_query_wakes_on_destroy(self):
        sid = self.c.session_create()
        index = self.index(f"/v1/session/info/{sid}")
        call = self.blocked(f"/v1/session/info/{sid}?index={index}&wait=10s")
        self.c.session_destroy(sid)
        status, _, body = call.outcome()
        self.assertEqual((status, body), (200, "[]"))


ACL = {
    "tokens": {
        "app-secret": {"accessor": "aaaaaaaa-0000-0000-0000-000000000001",
                       "key_prefix": {"app/": "write", "app/ro/": "read"},
                       "session": "write", "agent": "read"},
        "reader-secret": {"accessor": "aaaaaaaa-0000-0000-0000-000000000002",
                          "key_prefix": {"": "read"}},
        "admin-secret": {"key_prefix": {"": "write"}, "session": "write", "agent": "read"},
    },
}


class AclTests(DoubleCase):
    options = {"acl": ACL}

    def denied(self, method, path, token=None, headers=None):
        status, _, body = self.raw(method, path, token=token, headers=headers)
        self.assertEqual(status, 403, body)
        return body

    def test_key_prefix_rules(self):
        self.assertTrue(self.c.put("app/x", b"1", token="app-secret"))
        self.assertEqual(
            self.denied("PUT", "/v1/kv/other/x", "app-secret"),
            "Permission denied: token with AccessorID 'aaaaaaaa-0000-0000-0000-000000000001' "
            "lacks permission 'key:write' on \"other/x\"")
        self.denied("PUT", "/v1/kv/app/ro/x", "app-secret")  # the longer prefix decides
        self.assertEqual(self.c.get("app/x", token="reader-secret")[0]["Value"], b"1")
        self.denied("PUT", "/v1/kv/app/x", "reader-secret")
        self.denied("DELETE", "/v1/kv/app/?recurse", "app-secret")  # app/ro/ is below it

    def test_anonymous_and_unknown_tokens(self):
        self.assertEqual(
            self.denied("GET", "/v1/kv/app/x"),
            "Permission denied: anonymous token lacks permission 'key:read' on \"app/x\". The "
            "anonymous token is used implicitly when a request does not specify a token.")
        self.assertEqual(self.denied("GET", "/v1/kv/app/x", "nobody"), "ACL not found")

    def test_token_sources(self):
        self.c.put("app/t", b"1", token="app-secret")
        for path, headers in ((f"/v1/kv/app/t?token=app-secret", None),
                              ("/v1/kv/app/t", {"Authorization": "Bearer app-secret"})):
            self.assertEqual(self.raw("GET", path, headers=headers)[0], 200)

    def test_listing_is_filtered(self):
        self.c.put("app/list", b"1", token="admin-secret")
        self.c.put("hidden/list", b"1", token="admin-secret")
        status, headers, body = self.raw("GET", "/v1/kv/?recurse", token="app-secret")
        self.assertEqual(status, 200)
        self.assertNotIn("hidden/", body)
        self.assertEqual(headers["X-Consul-Results-Filtered-By-ACLs"], "true")

    def test_sessions_and_agent(self):
        self.c.session_create(token="app-secret")
        self.assertEqual(
            self.denied("PUT", "/v1/session/create", "reader-secret"),
            "Permission denied: token with AccessorID 'aaaaaaaa-0000-0000-0000-000000000002' "
            "lacks permission 'session:write' on \"consul-double\"")
        self.assertEqual(self.raw("GET", "/v1/agent/self", token="app-secret")[0], 200)
        self.assertIn("'agent:read' on \"consul-double\"",
                      self.denied("GET", "/v1/agent/self", "reader-secret"))


class TransportTests(DoubleCase):
    options = {"unix": True, "client_certs": True}

    def test_tls_with_client_certificate(self):
        self.assertEqual(self.c.request("GET", "/v1/status/leader", via="https")[0], 200)
        host, port = self.c.https_addr.rsplit(":", 1)
        bare = http.client.HTTPSConnection(host, int(port), timeout=10,
                                           context=self.c.tls_context(client_cert=False))
        with self.assertRaises((ssl.SSLError, ConnectionError)):
            bare.request("GET", "/v1/status/leader")
            bare.getresponse()
        bare.close()

    def test_unix_socket_shares_the_state(self):
        self.c.put(self.k("u"), b"over tcp")
        status, _, body = self.c.request("GET", f"/v1/kv/{self.k('u')}?raw", via="unix")
        self.assertEqual((status, body), (200, b"over tcp"))


class FaultTests(unittest.TestCase):
    """A fresh double per test: faults leave marks."""

    def setUp(self):
        self.c = ConsulDouble(session_ttl_min="1s").__enter__()
        self.addCleanup(self.c.__exit__, None, None, None)

    def test_5xx_window(self):
        self.c.fail_5xx(0.5)
        self.assertEqual(self.c.request("GET", "/v1/kv/x")[0::2], (500, b"No cluster leader"))
        self.c.fail_5xx(5, status=503, body="rate limited")
        self.assertEqual(self.c.request("PUT", "/v1/kv/x", b"1")[0], 503)
        self.c.heal()
        self.assertEqual(self.c.request("PUT", "/v1/kv/x", b"1")[0], 200)

    def test_5xx_window_ends_by_itself(self):
        self.c.fail_5xx(0.3)
        wait_for(lambda: self.c.request("GET", "/v1/status/leader")[0] == 200, 5, "the window end")

    def test_partition_answers_nothing_and_then_drops(self):
        self.c.put("before", b"1")
        self.c.partition(1)
        start = time.monotonic()
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            self.c.request("PUT", "/v1/kv/during", b"1", timeout=10)
        self.assertGreaterEqual(time.monotonic() - start, 0.9)

        def answers():  # the partition's end drops what is in flight, then serves again
            try:
                return self.c.request("GET", "/v1/status/leader", timeout=2)[0] == 200
            except (http.client.HTTPException, ConnectionError):
                return False
        wait_for(answers, 5, "the partition's end")
        self.assertIsNone(self.c.get("during"))  # the request never reached the server
        self.assertEqual(self.c.get("before")[0]["Value"], b"1")

    def test_partition_drops_waiting_queries(self):
        self.c.put("k", b"1")
        index = int(self.c.request("GET", "/v1/kv/k")[1]["X-Consul-Index"])
        call = Background(lambda: self.c.request("GET", f"/v1/kv/k?index={index}&wait=30s"))
        wait_for(lambda: self.c.request_count() >= 3, 5, "the blocking query")
        self.c.partition(0.5)
        call.outcome()
        self.assertIsInstance(call.error, (http.client.RemoteDisconnected, ConnectionError))

    def test_drop_connections(self):
        self.c.put("k", b"1")
        index = int(self.c.request("GET", "/v1/kv/k")[1]["X-Consul-Index"])
        call = Background(lambda: self.c.request("GET", f"/v1/kv/k?index={index}&wait=30s"))
        wait_for(lambda: self.c.request_count() >= 3, 5, "the blocking query")
        self.c.drop_connections()
        call.outcome(5)
        self.assertIsInstance(call.error, (http.client.RemoteDisconnected, ConnectionError))
        self.assertEqual(self.c.get("k")[0]["Value"], b"1")

    def test_restart_keeps_state_and_resets_ttls(self):
        sid = self.c.session_create(TTL="1s")
        self.c.put("held", acquire=sid)
        time.sleep(0.6)  # most of the TTL passes before the restart
        self.c.restart(0.6)
        with self.assertRaises(ConnectionRefusedError):
            self.c.request("GET", "/v1/kv/held")
        self.assertTrue(self.c.wait_up())
        # 1.2s after creation: alive only because the new leader restarted its TTL.
        self.assertEqual(self.c.get("held")[0]["Session"], sid)
        wait_for(lambda: self.c.session_info(sid) is None, 5, "the reset TTL to run out")

    def test_requests_are_observed(self):
        self.c.request("GET", "/v1/kv/k?recurse", token="secret")
        seen = self.c.requests()[-1]
        self.assertEqual((seen["method"], seen["path"], seen["query"]),
                         ("GET", "/v1/kv/k", "recurse"))
        self.assertEqual(seen["headers"]["x-consul-token"], "secret")
        self.assertEqual(self.c.request_count(), len(self.c.requests()))
        self.c.clear_requests()
        self.assertEqual(self.c.request_count(), 0)

    def test_requests_carry_their_arrival_time(self):
        before = time.monotonic()
        self.c.request("GET", "/v1/status/leader")
        after = time.monotonic()
        self.assertTrue(before <= self.c.requests()[-1]["at"] <= after)

    def test_5xx_with_headers(self):
        self.c.fail_5xx(5, status=503, body="busy", headers={"Retry-After": "2"})
        status, headers, body = self.c.request("GET", "/v1/kv/x")
        self.assertEqual((status, headers["Retry-After"], body), (503, "2", b"busy"))

    def test_reply_rule_answers_the_matching_requests_only_as_often_as_told(self):
        self.c.put("k", b"1")
        self.c.reply_fault("/v1/session/create", method="PUT", body='{"ID":"../../kv/x"}',
                           headers={"Content-Type": "application/json"})
        self.c.reply_fault("/v1/kv/", prefix=True, method="PUT", query="cas=", times=2,
                           body="true")
        self.assertEqual(self.c.request("PUT", "/v1/session/create", b"{}")[2],
                         b'{"ID":"../../kv/x"}')
        self.assertEqual(len(self.c.sessions()), 0)  # the real endpoint was not asked
        self.assertEqual(self.c.request("PUT", "/v1/kv/k?cas=99", b"2")[2], b"true")
        self.assertEqual(self.c.request("PUT", "/v1/kv/k", b"3")[2], b"true")  # no cas=: real
        self.assertEqual(self.c.request("PUT", "/v1/kv/k?cas=99", b"4")[2], b"true")
        self.assertEqual(self.c.get("k")[0]["Value"], b"3")  # canned answers changed nothing
        self.assertEqual(self.c.request("PUT", "/v1/kv/k?cas=99", b"5")[2], b"false")  # spent
        self.assertTrue(self.c.session_create())

    def test_reply_rule_endless_body(self):
        self.c.reply_fault("/v1/kv/big", mode="endless")
        conn = self.c.connection()
        conn.request("GET", "/v1/kv/big")
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertEqual(len(resp.read(8 << 20)), 8 << 20)  # far past any sane reply
        conn.close()

    def test_reply_rule_hang_withholds_the_answer_then_drops(self):
        self.c.reply_fault("/v1/session/destroy/", prefix=True, mode="hang", hang_seconds=0.5)
        start = time.monotonic()
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            self.c.request("PUT", "/v1/session/destroy/x", timeout=10)
        self.assertGreaterEqual(time.monotonic() - start, 0.45)
        self.assertEqual(self.c.request("PUT", "/v1/session/destroy/x")[0], 200)  # spent

    def test_heal_ends_a_hang(self):
        self.c.reply_fault("/v1/kv/k", mode="hang", times=None)
        call = Background(lambda: self.c.request("GET", "/v1/kv/k", timeout=30))
        wait_for(lambda: self.c.request_count() >= 1, 5, "the request to arrive")
        start = time.monotonic()
        self.c.heal()
        call.outcome(5)
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(self.c.request("GET", "/v1/kv/k")[0], 404)  # the rule went with it

    def test_index_faults_answer_blocking_queries_at_once(self):
        self.c.put("k", b"1")
        index = int(self.c.request("GET", "/v1/kv/k")[1]["X-Consul-Index"])
        for mode, expected in (("unchanged", index), ("backwards", index - 1), ("zero", 0),
                               ("spurious", index + 1)):
            with self.subTest(mode=mode):
                self.c.index_fault(mode, 30)
                start = time.monotonic()
                status, headers, body = self.c.request("GET", f"/v1/kv/k?index={index}&wait=10s")
                self.assertLess(time.monotonic() - start, 5)
                self.assertEqual((status, int(headers["X-Consul-Index"])), (200, expected))
                self.assertEqual(json.loads(body)[0]["Key"], "k")
        self.c.heal()
        # Healed, a blocking query blocks again: a write ends it.
        call = Background(lambda: self.c.request("GET", f"/v1/kv/k?index={index}&wait=10s"))
        wait_for(lambda: self.c.request_count() >= 6, 5, "the blocking query")
        self.assertTrue(call.is_alive())
        self.c.put("k", b"2")
        self.assertGreater(int(call.outcome()[1]["X-Consul-Index"]), index)


class PeerTests(DoubleCase):
    """consul_peer.py, the port of the Go client and `consul lock`, against the double."""

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="consul-peer-")
        self.log = os.path.join(self.tmp, "log")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stdin.close()
        for name in os.listdir(self.tmp):
            os.unlink(os.path.join(self.tmp, name))
        os.rmdir(self.tmp)

    def peer(self, name, *flags, prefix=None):
        """A peer whose child logs its name, then waits for its stdin to close."""
        child = f"echo {name} held=$CONSUL_LOCK_HELD >> {self.log}; cat >/dev/null"
        p = subprocess.Popen([sys.executable, PEER, "-http-addr", self.c.http_addr,
                              "-pass-stdin", *flags, prefix or self.prefix, "--", child],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=PEER_ENV)
        self.procs.append(p)
        return p

    def logged(self):
        try:
            with open(self.log) as f:
                return f.read().split("\n")
        except FileNotFoundError:
            return []

    def finish(self, p):
        """Lets the peer's child end (communicate closes its stdin) and checks the peer's exit."""
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)

    def contenders(self, n):
        return wait_for(lambda: len(self.c.sessions()) >= n, 10, f"{n} sessions")

    def test_two_peers_exclude_each_other(self):
        a = self.peer("A")
        wait_for(lambda: "A held=true" in self.logged(), 10, "A to hold")
        b = self.peer("B")
        self.contenders(2)
        # A's monitor blocks without a wait time; B's acquisition loop blocks with one.
        wait_for(lambda: any("index=" in r["query"] and "wait=" in r["query"]
                             for r in self.c.requests()
                             if r["path"] == f"/v1/kv/{self.prefix}.lock"), 10, "B to wait")
        self.assertNotIn("B held=true", self.logged())
        self.finish(a)
        wait_for(lambda: "B held=true" in self.logged(), 20, "B to take over")
        self.finish(b)
        self.assertEqual(self.c.get(self.prefix, recurse=True), None)  # .lock cleaned up
        self.assertEqual(self.c.sessions(), [])

    def test_semaphore_limit_respected(self):
        a, b = self.peer("A", "-n", "2"), self.peer("B", "-n", "2")
        wait_for(lambda: {"A held=true", "B held=true"} <= set(self.logged()), 10, "two holders")
        c = self.peer("C", "-n", "2")
        wait_for(lambda: len(self.c.get(self.prefix, recurse=True) or []) == 4, 10,
                 "C's contender key")
        lock = json.loads(self.c.get(self.k(".lock"))[0]["Value"])
        self.assertEqual((lock["Limit"], len(lock["Holders"])), (2, 2))
        self.assertNotIn("C held=true", self.logged())
        self.finish(a)
        wait_for(lambda: "C held=true" in self.logged(), 20, "C to take the free slot")
        self.finish(b)
        self.finish(c)
        self.assertIsNone(self.c.get(self.prefix, recurse=True))

    def test_conflicts_are_reported(self):
        holder = self.peer("S", "-n", "2")
        wait_for(lambda: "S held=true" in self.logged(), 10, "the semaphore holder")
        cases = [(("-n", "3"), "semaphore limit conflict (lock: 2, local: 3)"),
                 ((), "Existing key does not match lock use")]
        for flags, text in cases:
            p = subprocess.run([sys.executable, PEER, "-http-addr", self.c.http_addr, *flags,
                                self.prefix, "true"], capture_output=True, text=True, timeout=60)
            self.assertEqual((p.returncode, p.stderr.strip()),
                             (1, f"Lock acquisition failed: {text}"))
        self.finish(holder)
        locker = self.peer("L", prefix=self.k("other"))
        wait_for(lambda: "L held=true" in self.logged(), 10, "the lock holder")
        p = subprocess.run([sys.executable, PEER, "-http-addr", self.c.http_addr, "-n", "2",
                            self.k("other"), "true"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.stderr.strip(),
                         "Lock acquisition failed: Existing key does not match semaphore use")
        self.finish(locker)
        self.assertEqual(self.c.sessions(), [])  # the refused peers left nothing behind

    def test_lost_lock_stops_the_child(self):
        a = self.peer("A")
        wait_for(lambda: "A held=true" in self.logged(), 10, "A to hold")
        self.c.session_destroy(self.c.sessions()[0]["ID"])
        # The peer ends while its child's stdin is still open: it stopped the child itself.
        wait_for(lambda: a.poll() is not None, 20, "the peer to stop its child and exit")
        out, err = a.communicate(timeout=30)
        self.assertEqual(a.returncode, 0, err)
        self.assertIsNone(self.c.get(self.k(".lock")))


if __name__ == "__main__":
    unittest.main()
