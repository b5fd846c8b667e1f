"""Every script in bench/ runs to its end on tiny settings and prints its table, so that a bench
that no longer runs is found here rather than by whoever next measures. No figure is checked:
what the project claims about speed comes from full-size runs, never from timed assertions."""

import os
import shutil
import subprocess
import sys
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LOCK = os.environ.get("LOCK_BIN") or os.path.join(ROOT, "build", "lock")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import postgres_server  # noqa: E402
import zookeeper_server  # noqa: E402


class BenchTest(unittest.TestCase):

    def bench(self, script, must_print, **knobs):
        env = dict(os.environ, LOCK_BIN=LOCK, PYTHONDONTWRITEBYTECODE="1", **knobs)
        r = subprocess.run(["bash", os.path.join(ROOT, "bench", script)], env=env, timeout=300,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 0, out)
        for text in must_print:
            self.assertIn(text, out)
        self.assertNotIn("Traceback", out)
        self.assertNotIn("\n!! ", out)  # the local benches' mark for failed runs or leftovers

    def run_python(self, script, args, must_print):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", script), *args],
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"), timeout=300,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
        out = r.stdout + r.stderr
        self.assertEqual(r.returncode, 0, out)
        for text in must_print:
            self.assertIn(text, out)
        self.assertNotIn("Traceback", out)

    def test_ab(self):
        self.run_python("ab.py", ["--a", LOCK, "--b", LOCK, "--runs", "3", "--warmup", "1"],
                        ["wall", "CPU", "B/A per pair"])

    @unittest.skipUnless(shutil.which("etcd"), "needs etcd (etcd-server)")
    def test_watchdog_probe(self):
        self.run_python("watchdog_probe.py", ["--lock", LOCK, "--only", "local"],
                        ["child daemonizes, lock killed", "overlap"])

    def test_local(self):
        self.bench("local.sh", ["== Summary", "contended acquisitions/s", "system calls"],
                   BENCH_REPS="3", BENCH_CONTENDERS="2", BENCH_ROUNDS="2", BENCH_SEM_ROUNDS="1",
                   BENCH_TRIALS="1")

    def test_local_holders(self):
        self.bench("local_holders.sh", ["lock", "flock"], BENCH_HOLDERS="20", BENCH_IDLE="1")

    @unittest.skipUnless(shutil.which("etcd"), "needs etcd (etcd-server)")
    def test_scale(self):
        self.bench("scale.sh", ["== Fleet", "lock / peer", "etcd ", "zookeeper ", "consul -n 2 ", "local ",
                                "postgres -n 2 ", "try -timeout 100ms"], BENCH_SCALE_N="3",
                   BENCH_SCALE_TRY="3")

    def test_consul(self):
        self.bench("consul.sh", ["== Summary", "requests, -n 3", "loss to SIGTERM", "peak RSS"],
                   BENCH_RUNS="1")

    @unittest.skipUnless(shutil.which("etcd") and shutil.which("etcdctl"),
                         "needs etcd and etcdctl (etcd-server, etcd-client)")
    def test_etcd(self):
        self.bench("etcd.sh", ["== Summary", "contended, acquisitions/s", "peak RSS"],
                   BENCH_REPS="2", BENCH_CONTENDERS="2", BENCH_ROUNDS="2", BENCH_TRIALS="1")

    @unittest.skipIf(zookeeper_server.missing() or not shutil.which("java"),
                     zookeeper_server.missing() or "needs java")
    def test_zookeeper(self):
        self.bench("zookeeper.sh", ["== Summary", "contended, acquisitions/s", "peak RSS"],
                   BENCH_REPS="2", BENCH_JVM_REPS="1", BENCH_CONTENDERS="2", BENCH_ROUNDS="2",
                   BENCH_TRIALS="1")

    @unittest.skipIf(postgres_server.missing() or postgres_server.withlock_missing(),
                     postgres_server.missing() or postgres_server.withlock_missing())
    def test_postgres(self):
        self.bench("postgres.sh", ["== Summary: lock against withlock", "lock against psql-lock",
                                   "statements per run", "peak RSS"],
                   BENCH_REPS="2", BENCH_CONTENDERS="2", BENCH_ROUNDS="2", BENCH_TRIALS="1")


if __name__ == "__main__":
    unittest.main()
