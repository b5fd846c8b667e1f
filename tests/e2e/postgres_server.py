"""A real PostgreSQL server for the tests: Debian's PostgreSQL (the newest version installed under
/usr/lib/postgresql) on a free loopback port, in a temporary directory, started and stopped by
its own PID. PostgresServer is a context manager; PostgresTestCase runs one per test module.

The server runs as `nobody` when the tests run as root (PostgreSQL refuses to run as root), as the
current user otherwise. It listens on 127.0.0.1 only; its unix socket lives in the temporary
directory, which only the server's user (and root) can enter. pg_hba.conf has two lines:
  local  all all                trust          the fixture's own admin queries (psql, superuser
                                               "postgres"), unreachable by anyone else
  host   all all 127.0.0.1/32   scram-sha-256  everyone else: the tests' role (USER, with a random
                                               password) owns the tests' database (DBNAME)
so a wrong or missing password over TCP is refused, as on a real server.

Quick to start and light, since nothing here must survive a power cut: fsync and
full_page_writes off, minimal WAL, no archiving, no autovacuum, no parallel workers, 16 MB of
shared buffers. synchronous_commit stays on: a commit is then written to the kernel before it is
acknowledged (fsync off makes that cheap), so a server killed with SIGKILL (kill()) keeps every
transaction it acknowledged, as a crashed real one does; with it off, the last 0.6 s of commits
would go, and a counter kept in a table could go back across a crash. max_connections is 300,
for fleet tests: PostgreSQL on Linux keeps its semaphores in mmap'd shared memory and asks SysV
for one tiny segment only, so no kernel limit gets in the way (dynamic shared memory is mmap'd in
the data directory too, so a killed server leaves nothing in /dev/shm).

The postmaster is started directly (not through `pg_ctl start`, which would leave it to init) as a
child of a thread that lives as long as the fixture, with a parent-death signal: if the test
process dies (a ctest timeout's SIGKILL), the postmaster dies with it and its backends follow.
stop() is `pg_ctl stop -m fast`, then SIGKILL of the postmaster and its children if that is not
enough.

Timings on the 2-core test machine under a running suite: initdb about 1.7 s, a start 0.1 to
0.3 s (see start_seconds), a fast stop 0.1 s.

The admin helpers (sql, sessions, advisory_locks, terminate) run psql over the unix socket, one
process per call, so they survive restarts and need no Python driver; their sessions carry the
application_name FIXTURE_APP and are left out of sessions().

withlock, the CLI peer (npm advisory-lock 2.0.0, installed by scripts/install-deps.sh under
/opt/lock-test-peers; WITHLOCK is its path, or None):
    withlock [--db URL] NAME -- COMMAND [ARG...]
The URL is a node-postgres connection string; without --db it comes from PG_CONNECTION_STRING,
and withlock fails (exit 1) when neither is there; what the URL leaves out comes from PGHOST,
PGPORT, PGUSER, PGPASSWORD and PGDATABASE (so PG_CONNECTION_STRING=postgresql:// with pg_env()
works). It opens one connection, runs `SELECT pg_advisory_lock(k1, k2)` on it (a blocking,
session-level lock in the two-int4 key space), prints "Lock acquired" and the command to stdout,
spawns COMMAND directly (no shell, stdio inherited), and when that exits runs
pg_advisory_unlock(k1, k2), closes the connection and exits with the command's exit status (0 when
a signal killed it). Seen here: when its session is terminated, withlock dies of an unhandled
error (exit 1, a stack trace on stderr) and its command runs on without the lock; on SIGTERM it
dies (the lock goes with its connection) and its command runs on too. The key comes from the name
(withlock_key below):
    digest = sha256(name as UTF-8)
    k1 = the signed 32-bit little-endian integer in digest bytes 0..3
    k2 = the signed 32-bit little-endian integer in digest bytes 4..7
In pg_locks such a lock shows as locktype 'advisory', objsubid 2, classid = k1 and objid = k2
read as unsigned 32-bit (oid) values; withlock_key_sql gives the same key in plain SQL.
"""

import concurrent.futures
import datetime
import hashlib
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

from harness import SLOW, LockTestCase, free_port, pid_alive, proc_stat, tail, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "consul_double"))
from fixture import make_test_pki  # noqa: E402


def _newest_bin_dir():
    root = "/usr/lib/postgresql"
    try:
        versions = [v for v in os.listdir(root) if re.fullmatch(r"\d+(\.\d+)?", v)]
    except OSError:
        return None
    for v in sorted(versions, key=lambda v: [int(x) for x in v.split(".")], reverse=True):
        if os.path.exists(os.path.join(root, v, "bin", "initdb")):
            return os.path.join(root, v, "bin")
    return None


PG_BIN = _newest_bin_dir()
INITDB = PG_BIN and os.path.join(PG_BIN, "initdb")
PG_CTL = PG_BIN and os.path.join(PG_BIN, "pg_ctl")
POSTGRES = PG_BIN and os.path.join(PG_BIN, "postgres")
PSQL = shutil.which("psql") or (PG_BIN and os.path.join(PG_BIN, "psql"))
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
SERVER_USER = "nobody"  # when the tests run as root

PEERS = "/opt/lock-test-peers"
_withlock = os.path.join(PEERS, "node_modules", ".bin", "withlock")
WITHLOCK = _withlock if os.access(_withlock, os.X_OK) and shutil.which("node") else None

USER = "lock_user"
DBNAME = "lock_db"
SUPERUSER = "postgres"
FIXTURE_APP = "lock-test-fixture"
START_TIMEOUT = 30.0  # seconds (times SLOW); a start takes well under a second
START_MARK = "--- lock tests: starting"  # a line in the log before each start
DEFAULT_TTL = 10.0  # seconds: lock's -session-ttl on PostgreSQL unless given

# Field, record and NULL markers for psql's unaligned output: bytes no test value contains.
_FS, _RS, _NULL = "\x1f", "\x1e", "\x1d"


def missing():
    """What the PostgreSQL fixture needs and this machine lacks (None when nothing), for skipIf."""
    lacking = []
    if not PG_BIN:
        lacking.append("a PostgreSQL server (postgresql: initdb in /usr/lib/postgresql/*/bin)")
    else:
        lacking += [p for p in (PG_CTL, POSTGRES) if not os.path.exists(p)]
    if not PSQL or not os.path.exists(PSQL):
        lacking.append("psql (postgresql-client)")
    if not os.path.exists(SETPRIV):
        lacking.append("setpriv (util-linux)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            lacking.append(f"the user {SERVER_USER}")
    return "needs " + ", ".join(lacking) if lacking else None


def withlock_missing():
    """What running withlock needs and this machine lacks (None when nothing), for skipIf."""
    if WITHLOCK:
        return None
    if not shutil.which("node"):
        return "needs node (nodejs) for withlock"
    return f"needs withlock (npm advisory-lock, in {PEERS}: scripts/install-deps.sh)"


def withlock_key(name):
    """The advisory lock key (k1, k2) withlock takes for `name`: pg_advisory_lock(k1, k2)."""
    digest = hashlib.sha256(name.encode()).digest()
    return (int.from_bytes(digest[0:4], "little", signed=True),
            int.from_bytes(digest[4:8], "little", signed=True))


def withlock_key_sql(name_expr):
    """A query of withlock's key for the text `name_expr` (an SQL expression, used once), as two
    int4 columns k1, k2: `SELECT pg_advisory_lock(k1, k2) FROM (<this>) k` excludes withlock."""

    def le32(first):  # bit(32) reads big-endian, so the bytes go in reverse
        parts = " || ".join(f"substring(h from {first + i} for 1)" for i in (3, 2, 1, 0))
        return f"('x' || encode({parts}, 'hex'))::bit(32)::int4"

    return (f"SELECT {le32(1)} AS k1, {le32(5)} AS k2 "
            f"FROM (SELECT sha256(convert_to({name_expr}, 'UTF8')) AS h) AS digest")


def conninfo_quote(value):
    """A value for a libpq key=value connection string."""
    value = str(value)
    if value and not re.search(r"[\s'\\]", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _pgpass_field(value):
    return str(value).replace("\\", "\\\\").replace(":", "\\:")


def _without_pg_vars(env):
    """`env` less every libpq variable, so that none from outside steers a test's client."""
    return {k: v for k, v in env.items() if not k.startswith("PG")}


def _reachable_by_others(path):
    """Whether a user other than the owner can get to `path` (every ancestor searchable)."""
    path = os.path.abspath(path)
    while True:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


class SQLError(RuntimeError):
    """psql failed; .stderr has what the server or psql said."""

    def __init__(self, message, stderr):
        super().__init__(message)
        self.stderr = stderr


class PostgresServer:
    """One server. `settings` adds or overrides postgresql.conf lines (e.g. log_connections=on).

    Attributes: host ("127.0.0.1"), port, user, password, dbname (the tests' role and database),
    superuser, socket_dir, data_dir, log_path, pid (the postmaster's, None when down),
    start_seconds (the last start, postmaster to ready), init_seconds (initdb)."""

    def __init__(self, settings=None, max_connections=300, tls=False):
        self.as_root = os.geteuid() == 0
        tmp = tempfile.gettempdir()
        if self.as_root and not _reachable_by_others(tmp):
            tmp = "/tmp"  # the server's user must reach its directory
        self.dir = tempfile.mkdtemp(prefix="lock-postgres-", dir=tmp)
        if self.as_root:
            entry = pwd.getpwnam(SERVER_USER)
            self.uid, self.gid = entry.pw_uid, entry.pw_gid
            os.chown(self.dir, self.uid, self.gid)
        self.data_dir = os.path.join(self.dir, "data")
        self.socket_dir = self.dir
        self.log_path = os.path.join(self.dir, "postgres.log")
        self.host = "127.0.0.1"
        self.port = None
        self.user, self.dbname, self.superuser = USER, DBNAME, SUPERUSER
        self.password = "pw-" + secrets.token_hex(12)
        self.settings = {
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.socket_dir}'",
            "unix_socket_permissions": "0700",
            "max_connections": max_connections,
            "shared_buffers": "16MB",
            "fsync": "off",
            "full_page_writes": "off",
            "wal_level": "minimal",
            "max_wal_senders": 0,
            "archive_mode": "off",
            "autovacuum": "off",
            "max_parallel_workers_per_gather": 0,
            "jit": "off",
            "huge_pages": "off",
            "dynamic_shared_memory_type": "mmap",
            "logging_collector": "off",
            "log_line_prefix": "'%m [%p] %q%u@%d '",
            # When each session ended, to the millisecond, for disconnected_at().
            "log_disconnections": "on",
            "log_timezone": "'UTC'",
            "password_encryption": "scram-sha-256",
        }
        self.settings.update(settings or {})
        self.tls = tls
        self.ca = None  # with tls: the CA file that signed the server's certificate
        self.proc = None
        self.log = None
        self._settled_for = 0
        self.start_seconds = None
        self.init_seconds = None
        # The postmaster's parent-death signal follows the thread that forked it: one thread,
        # alive as long as the fixture, starts every postmaster.
        self._spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="postgres-spawner")

    # Life cycle.

    def __enter__(self):
        try:
            self._initdb()
            if self.tls:
                self._make_pki()
            for _ in range(5):  # a port picked as free may be taken before the server binds it
                self.port = free_port()
                self._write_config()
                if self._start():
                    break
                if not self._bind_failed():
                    raise RuntimeError(f"PostgreSQL did not start; see {self.log_path}")
            else:
                raise RuntimeError(f"PostgreSQL found no free port; see {self.log_path}")
            self._create_role_and_database()
            return self
        except BaseException:
            self._cleanup(keep_log=True)
            raise

    def __exit__(self, *exc):
        self._cleanup(keep_log=False)

    def _cleanup(self, keep_log):
        self.stop()
        self._spawner.shutdown(wait=True)
        if keep_log:  # the log is what tells why a start failed; the data can go
            shutil.rmtree(self.data_dir, ignore_errors=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _as_server_user(self, *argv, pdeathsig=False):
        prefix = [SETPRIV]
        if self.as_root:
            prefix += [f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"]
        if pdeathsig:
            prefix += ["--pdeathsig", "KILL"]
        return [*prefix, "--", *argv]

    def _server_env(self):
        return dict(_without_pg_vars(os.environ), LC_ALL="C")

    def _initdb(self):
        began = time.monotonic()
        r = subprocess.run(
            self._as_server_user(INITDB, "-D", self.data_dir, "-U", SUPERUSER, "-E", "UTF8",
                                 "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256",
                                 "--no-sync", "--no-instructions"),
            cwd=self.dir, env=self._server_env(), stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=120 * SLOW)
        if r.returncode != 0:
            raise RuntimeError(f"initdb failed ({r.returncode}): {r.stderr.strip()}")
        self.init_seconds = time.monotonic() - began
        with open(os.path.join(self.data_dir, "pg_hba.conf"), "w") as f:
            f.write("local all all trust\n"
                    "host all all 127.0.0.1/32 scram-sha-256\n")

    def _make_pki(self):
        """A throwaway CA and a certificate for 127.0.0.1 (tests/consul_double's make_test_pki);
        the server's key belongs to the server's user, mode 0600, as PostgreSQL requires."""
        pki_dir = os.path.join(self.dir, "pki")
        os.mkdir(pki_dir)
        pki = make_test_pki(pki_dir, client=False)
        os.chmod(pki["server_key"], 0o600)
        if self.as_root:
            for name in ("server_key", "server_cert"):
                os.chown(pki[name], self.uid, self.gid)
        self.ca = pki["ca"]
        self.settings.update(ssl="on", ssl_cert_file=f"'{pki['server_cert']}'",
                             ssl_key_file=f"'{pki['server_key']}'")

    def _write_config(self):
        # Written to a file of its own, included last, so that a rewrite (a new port) replaces it.
        conf = os.path.join(self.data_dir, "postgresql.conf")
        include = "include = 'lock_tests.conf'\n"
        with open(conf) as f:
            text = f.read()
        if include not in text:
            with open(conf, "a") as f:
                f.write("\n" + include)
        path = os.path.join(self.data_dir, "lock_tests.conf")
        with open(path, "w") as f:
            for k, v in {"port": self.port, **self.settings}.items():
                f.write(f"{k} = {v}\n")
        if self.as_root:
            os.chown(path, self.uid, self.gid)

    def _start(self):
        """Starts the postmaster and waits until it accepts connections; False if it died (say,
        of a port clash)."""
        began = time.monotonic()
        self.log = open(self.log_path, "a")
        self.log.write(f"{START_MARK} on port {self.port}\n")
        self.log.flush()
        self.proc = self._spawner.submit(
            subprocess.Popen, self._as_server_user(POSTGRES, "-D", self.data_dir, pdeathsig=True),
            cwd=self.dir, env=self._server_env(), stdin=subprocess.DEVNULL,
            stdout=self.log, stderr=subprocess.STDOUT).result()
        try:
            wait_for(lambda: not self.alive() or self._ready(), START_TIMEOUT, "PostgreSQL to start")
        except AssertionError as e:
            self.kill()
            raise RuntimeError(f"{e}; see {self.log_path}") from None
        if not self.alive():
            self._reap()
            return False
        self.start_seconds = time.monotonic() - began
        self._settled_for = 0
        return True

    def _ready(self):
        """Whether postmaster.pid names our postmaster and says it accepts connections."""
        try:
            with open(os.path.join(self.data_dir, "postmaster.pid")) as f:
                lines = f.read().splitlines()
        except OSError:
            return False
        return len(lines) >= 8 and lines[0] == str(self.proc.pid) and lines[7].strip() == "ready"

    def _bind_failed(self):
        last = tail(self.log_path, 200).rsplit(START_MARK, 1)[-1]
        return "could not bind" in last or "Address already in use" in last

    def _create_role_and_database(self):
        self.sql(f"CREATE ROLE {USER} LOGIN PASSWORD %s", self.password, dbname="postgres")
        self.sql(f"CREATE DATABASE {DBNAME} OWNER {USER}", dbname="postgres")

    @property
    def pid(self):
        return self.proc.pid if self.alive() else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        """Starts the server again (after stop or kill): same port, same data."""
        if self.alive():
            return
        if not self._start():
            raise RuntimeError(f"PostgreSQL did not start again on port {self.port}; "
                               f"see {self.log_path}")

    def stop(self, timeout=30.0):
        """A fast shutdown (sessions are ended, their locks released); SIGKILL if it is not done
        within `timeout`."""
        if not self.alive():
            self._reap()
            return
        self.resume()  # in case a test left it paused
        r = subprocess.run(self._as_server_user(PG_CTL, "stop", "-D", self.data_dir, "-m", "fast",
                                                "-s", "-t", str(int(timeout * SLOW))),
                           cwd=self.dir, env=self._server_env(), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True)
        try:
            self.proc.wait(timeout=5 * SLOW if r.returncode == 0 else 0.5)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def kill(self):
        """SIGKILL of the postmaster and every process it started, as a crash of the machine
        would: start() or restart() brings it back (through crash recovery) with its data."""
        children = self.processes()[1:]
        if self.alive():
            for sig in (signal.SIGKILL, signal.SIGCONT):
                _signal(self.proc.pid, sig)
        for pid, started in children:
            _signal(pid, signal.SIGKILL, started)
            _signal(pid, signal.SIGCONT, started)
        self._reap()
        wait_for(lambda: not any(_same_process(pid, started) for pid, started in children),
                 10, "the server's processes to go")

    def restart(self):
        """A fast stop and a start: same port, same data; every session ends."""
        self.stop()
        self.start()

    def sessions_age(self):
        """Seconds since the server's sessions began: its start, or its last recovery from a
        crash (lock's own measure, pg_recipe.cpp's kSessionsAgeSql)."""
        (age,), = self.sql("SELECT extract(epoch FROM clock_timestamp() - greatest("
                           "pg_postmaster_start_time(), pg_stat_get_bgwriter_stat_reset_time()))")
        return float(age)

    def settle(self, ttl=DEFAULT_TTL, again=False):
        """Returns once the server's sessions began at least `ttl` seconds ago. lock starts a turn
        that came sooner only then (a holder the server forgot may still run), which would
        stretch every first acquisition on a fresh server by up to the TTL. `again` after a crash
        of a server process, which the fixture does not see."""
        if self._settled_for >= ttl and not again:
            return
        while (left := ttl - self.sessions_age()) > 0:
            time.sleep(left)  # until a time the server's clock set; then asked again
        self._settled_for = ttl

    def _reap(self):
        if self.proc is not None:
            self.proc.wait()
        if self.log is not None:
            self.log.close()
            self.log = None

    def processes(self):
        """(pid, start time) of the postmaster, first, and of each of its children; [] when down."""
        if not self.alive():
            return []
        pid = self.proc.pid
        fields = proc_stat(pid)
        out = [(pid, fields[19] if fields else None)]
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                f = proc_stat(int(entry))
                if f and f[1] == str(pid):
                    out.append((int(entry), f[19]))
        return out

    def pause(self):
        """SIGSTOP of the postmaster and all its children: connections stay open, nothing
        answers, a new connection is accepted by the kernel and then hangs. Returns once all
        are stopped."""
        if not self.alive():
            return
        _signal(self.proc.pid, signal.SIGSTOP)
        # Once the postmaster is stopped it forks no more, so the list below is complete.
        wait_for(lambda: _stopped(self.proc.pid), 10, "the postmaster to stop")
        children = self.processes()[1:]
        for pid, started in children:
            _signal(pid, signal.SIGSTOP, started)
        wait_for(lambda: all(_stopped(pid) or not _same_process(pid, started)
                             for pid, started in children), 10, "the server's processes to stop")

    def resume(self):
        for pid, started in self.processes()[1:]:
            _signal(pid, signal.SIGCONT, started)
        if self.alive():
            _signal(self.proc.pid, signal.SIGCONT)

    # How clients reach it.

    def conninfo(self, password=True, **overrides):
        """A libpq key=value connection string for the tests' role (with its password, unless
        password=False, or a given one)."""
        params = {"host": self.host, "port": self.port, "user": self.user, "dbname": self.dbname}
        if password is True:
            params["password"] = self.password
        elif password:
            params["password"] = password
        params.update(overrides)
        return " ".join(f"{k}={conninfo_quote(v)}" for k, v in params.items())

    def uri(self, password=True, user=None, dbname=None, **query):
        """A postgresql:// URI for the tests' role (with its password unless password=False, or
        a given one); `query` adds parameters (connect_timeout=2, ...)."""
        user = user or self.user
        auth = urllib.parse.quote(user, safe="")
        if password:
            auth += ":" + urllib.parse.quote(self.password if password is True else password, safe="")
        path = urllib.parse.quote(dbname or self.dbname, safe="")
        uri = f"postgresql://{auth}@{self.host}:{self.port}/{path}"
        if query:
            uri += "?" + urllib.parse.urlencode(query)
        return uri

    def pg_env(self, password=True):
        """The libpq environment variables a user would set to reach this server."""
        env = {"PGHOST": self.host, "PGPORT": str(self.port), "PGUSER": self.user,
               "PGDATABASE": self.dbname}
        if password:
            env["PGPASSWORD"] = self.password if password is True else password
        return env

    def env(self, base, password=True):
        """`base` without any libpq variable of its own, with pg_env's and LOCK_BACKEND=postgres."""
        return dict(_without_pg_vars(base), **self.pg_env(password), LOCK_BACKEND="postgres")

    def write_pgpass(self, path, password=None, host=None, port=None, dbname=None, user=None):
        """Writes a password file (~/.pgpass's format) with one line for the tests' role, mode
        0600 as libpq requires; `*` matches anything. Returns the path."""
        fields = [host or self.host, port or self.port, dbname or self.dbname, user or self.user,
                  password or self.password]
        line = ":".join(f if f == "*" else _pgpass_field(f) for f in map(str, fields))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(line + "\n")
        os.chmod(path, 0o600)
        return path

    def add_role(self, name, password, create=False):
        """A login role with a password that may connect to the tests' database; with `create`
        it may also create tables there (the tests' own role owns the database and may)."""
        self.sql(f'CREATE ROLE "{name}" LOGIN PASSWORD %s', password, dbname="postgres")
        if create:
            self.sql(f'GRANT CREATE ON SCHEMA public TO "{name}"')

    # What the server sees: psql as the superuser, over the unix socket.

    def sql(self, query, *params, dbname=None, timeout=30.0):
        """Runs one statement as the superuser in the tests' database (or `dbname`); returns its
        rows as tuples of strings (None for NULL). With params, each %s in `query` is one of them
        as an SQL literal (quoted by psql; None is NULL) and %% is a %. Raises SQLError."""
        argv = [PSQL, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-F", _FS, "-R", _RS,
                "-P", f"null={_NULL}", "-h", self.socket_dir, "-p", str(self.port),
                "-U", self.superuser, "-d", dbname or self.dbname, "-f", "-"]
        if params:
            marks = re.findall(r"%%|%s", query)
            if marks.count("%s") != len(params):
                raise ValueError(f"{marks.count('%s')} placeholders for {len(params)} params: {query!r}")
            names = iter(range(1, len(params) + 1))

            def placeholder(m):
                if m.group() == "%%":
                    return "%"
                n = next(names)
                return "NULL" if params[n - 1] is None else f":'p{n}'"

            query = re.sub(r"%%|%s", placeholder, query)
            for n, value in enumerate(params, 1):
                if value is not None:
                    argv[1:1] = ["-v", f"p{n}={_literal(value)}"]
        env = dict(_without_pg_vars(os.environ), PGAPPNAME=FIXTURE_APP, LC_ALL="C",
                   PGCONNECT_TIMEOUT=str(max(2, int(timeout * SLOW))))
        try:
            r = subprocess.run(argv, input=query, env=env, capture_output=True, text=True,
                               timeout=timeout * SLOW)
        except subprocess.TimeoutExpired:
            raise SQLError(f"no answer within {timeout * SLOW:.1f}s to {query!r}", "") from None
        if r.returncode != 0:
            raise SQLError(f"psql failed ({r.returncode}) on {query!r}: {r.stderr.strip()}", r.stderr)
        out = r.stdout
        if not out:
            return []
        out = out[:-1] if out.endswith("\n") else out
        return [tuple(None if v == _NULL else v for v in rec.split(_FS)) for rec in out.split(_RS)]

    def sessions(self):
        """The sessions connected to the tests' database, besides the fixture's own, oldest
        first: dicts of pg_stat_activity's pid (int), usename, application_name, client_addr,
        client_port (int or None), backend_start, state, wait_event_type, wait_event, query."""
        cols = ["pid", "usename", "application_name", "client_addr", "client_port",
                "backend_start", "state", "wait_event_type", "wait_event", "query"]
        rows = self.sql(f"SELECT {', '.join(cols)} FROM pg_stat_activity "
                        "WHERE datname = %s AND pid <> pg_backend_pid() AND application_name <> %s "
                        "ORDER BY backend_start, pid", self.dbname, FIXTURE_APP)
        out = []
        for row in rows:
            s = dict(zip(cols, row))
            s["pid"] = int(s["pid"])
            s["client_port"] = int(s["client_port"]) if s["client_port"] else None
            out.append(s)
        return out

    def advisory_locks(self):
        """pg_locks' advisory locks (held and awaited), in any database: dicts of datname,
        classid, objid, objsubid, pid (ints; pid None for a prepared transaction's), mode,
        granted (bool), and key: the key as the lock functions took it, an int for the bigint
        form (objsubid 1), a pair of ints for the two-int4 form (objsubid 2)."""
        rows = self.sql("SELECT d.datname, l.classid, l.objid, l.objsubid, l.pid, l.mode, l.granted "
                        "FROM pg_locks l LEFT JOIN pg_database d ON d.oid = l.database "
                        "WHERE l.locktype = 'advisory' ORDER BY l.pid, l.classid, l.objid")
        out = []
        for datname, classid, objid, objsubid, pid, mode, granted in rows:
            classid, objid, objsubid = int(classid), int(objid), int(objsubid)
            if objsubid == 1:
                key = _signed((classid << 32) | objid, 64)
            else:
                key = (_signed(classid, 32), _signed(objid, 32))
            out.append({"datname": datname, "classid": classid, "objid": objid,
                        "objsubid": objsubid, "pid": int(pid) if pid else None, "mode": mode,
                        "granted": granted == "t", "key": key})
        return out

    def terminate(self, pid, wait=True):
        """pg_terminate_backend(pid); with `wait`, returns once the session is gone. Whether it
        was signalled (and, with wait, ended)."""
        if wait:
            rows = self.sql("SELECT pg_terminate_backend(%s, %s)", int(pid), int(10000 * SLOW))
        else:
            rows = self.sql("SELECT pg_terminate_backend(%s)", int(pid))
        return rows == [("t",)]

    def log_size(self):
        return os.path.getsize(self.log_path)

    def disconnected_at(self, pid, since, timeout=10.0):
        """When the session of server process `pid` ended, as seconds since the epoch: its
        "disconnection" line in the server's log, written as the process exits, after `since`
        (log_size() before the session could end: a pid may have served an earlier session)."""
        pattern = re.compile(rf"^(\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{{3}}) UTC \[{int(pid)}\] "
                             r"\S* ?LOG:  disconnection: ", re.M)

        def logged():
            with open(self.log_path, errors="replace") as f:
                f.seek(since)
                found = pattern.findall(f.read())
            return found[-1] if found else None
        stamp = wait_for(logged, timeout, f"the disconnection of session {pid} in the log")
        when = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f")
        return when.replace(tzinfo=datetime.timezone.utc).timestamp()


def _literal(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _signed(value, bits):
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _same_process(pid, started):
    fields = proc_stat(pid)
    return bool(fields) and (started is None or fields[19] == started) and pid_alive(pid)


def _stopped(pid):
    fields = proc_stat(pid)
    return fields is None or fields[0] in ("T", "t", "Z", "X")


def _signal(pid, sig, started=None):
    """Signals `pid` if it is still the process that started at `started` (when given)."""
    if started is not None and not _same_process(pid, started):
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


_module_servers = {}


def _module_server(settings, tls):
    """The classes of one test module share a server for each set of settings (it is settled
    once, not once per class), stopped once the module's tests are done."""
    key = repr((sorted((settings or {}).items()), tls))
    if key not in _module_servers:
        _module_servers[key] = PostgresServer(settings=settings, tls=tls).__enter__()
        unittest.addModuleCleanup(lambda: _module_servers.pop(key).__exit__(None, None, None))
    return _module_servers[key]


class PostgresTestCase(LockTestCase):
    """One server per test module (for each set of SETTINGS), a prefix per test, and self.env
    that reaches the server the way a user's shell would: PGHOST, PGPORT, PGUSER, PGDATABASE and
    PGPASSWORD (and
    LOCK_BACKEND=postgres). PGPASSFILE names a file that does not exist, so that no ~/.pgpass of
    the machine's supplies a password a test meant to leave out."""

    SETTINGS = None  # postgresql.conf lines for this class's server
    TLS = False  # whether it also takes TLS connections (its CA: self.pg.ca)
    # Whether lock runs here, and needs the server settled (PostgresServer.settle) before a test.
    SETTLE = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pg = _module_server(cls.SETTINGS, cls.TLS)

    def setUp(self):
        super().setUp()
        self.pg.start()  # in case an earlier test stopped it
        self.pg.resume()
        if self.SETTLE:
            self.pg.settle()
        self.env = self.pg.env(self.env)
        self.env["PGPASSFILE"] = self.path("no-pgpass")
        self.prefix = self.id().rsplit(".", 1)[1]  # a prefix of its own for each test
        self.sessions_before = {s["pid"] for s in self.pg.sessions()}

    def sessions_since_setup(self):
        return [s for s in self.pg.sessions() if s["pid"] not in self.sessions_before]

    def assert_nothing_left(self, timeout=10.0):
        """No session that this test opened is still connected (and so no advisory lock of one:
        session-level locks go with their session)."""
        wait_for(lambda: not self.sessions_since_setup(), timeout, "no session to be left")

    def withlock(self, name, *command, url=None):
        """The command line of a withlock holding `name` while it runs `command`."""
        return [WITHLOCK, "--db", url or self.pg.uri(), name, "--", *command]

    def start_withlock(self, name, *command, url=None, **kwargs):
        """Starts withlock in the background; the test's tearDown kills it if it still runs."""
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        p = subprocess.Popen(self.withlock(name, *command, url=url), env=self.env, text=True, **kwargs)
        self.procs.append(p)
        return p
