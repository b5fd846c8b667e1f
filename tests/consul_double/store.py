"""The state of the double's one-server datacenter: the Raft index, the KV table with its
tombstones, sessions with their TTL timers, and lock-delays.

The rules are Consul's own, from its state store (agent/consul/state/kvs.go, session.go), the
leader-side checks of agent/consul/kvs_endpoint.go (kvsPreApply) and the TTL timers of
agent/consul/session_ttl.go. Wordings of server errors are those of Consul 1.16, where an FSM
error comes back from raftApply as the error itself and the KVS/Session endpoints wrap it
("raft apply failed: %w", "apply failed: %w")."""

import dataclasses
import random
import threading
import time
import uuid

SECOND = 1_000_000_000
MAX_LOCK_DELAY = 60 * SECOND           # structs.MaxLockDelay
DEFAULT_QUERY_TIME = 300 * SECOND      # config default_query_time
MAX_QUERY_TIME = 600 * SECOND          # config max_query_time
JITTER_FRACTION = 16                   # structs.JitterFraction
SERF_CHECK = "serfHealth"


class RpcError(Exception):
    """An error the server returns over RPC; the HTTP layer answers it with 500 and its text."""


@dataclasses.dataclass
class Entry:
    key: str
    value: bytes | None
    flags: int
    lock_index: int = 0
    session: str = ""
    create_index: int = 0
    modify_index: int = 0

    def same(self, other):
        # structs.DirEntry.Equal: a write that changes none of these leaves ModifyIndex alone.
        return (self.lock_index, self.key, self.flags, self.value or b"", self.session) == \
            (other.lock_index, other.key, other.flags, other.value or b"", other.session)


@dataclasses.dataclass
class Session:
    id: str
    name: str
    node: str
    lock_delay: int
    behavior: str
    ttl: str
    ttl_ns: int
    node_checks: list | None
    service_checks: list | None
    checks: list | None
    create_index: int = 0
    modify_index: int = 0
    deadline: float | None = None


def query_timeout(wait_ns):
    """Seconds a blocking query may wait: agent/consul/rpc.go RPCQueryTimeout, with its jitter of
    up to wait/16 so that many waiters do not wake together."""
    if wait_ns > MAX_QUERY_TIME:
        wait_ns = MAX_QUERY_TIME
    elif wait_ns <= 0:
        wait_ns = DEFAULT_QUERY_TIME
    return (wait_ns + random.uniform(0, wait_ns / JITTER_FRACTION)) / SECOND


def _check_ids(node_checks, service_checks, checks):
    """Session.CheckIDs: the checks of every list a session has."""
    ids = list(checks or []) + list(node_checks or [])
    ids += [c["ID"] if isinstance(c, dict) else c for c in service_checks or []]
    return list(dict.fromkeys(ids))


class Store:
    def __init__(self, node, ttl_multiplier):
        self.node = node
        self.ttl_multiplier = ttl_multiplier
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._reaper_wake = threading.Condition(self._lock)
        # Index 1 is Raft's own first entry, so user writes start at 2 and 1 is never a real answer.
        self.raft_index = 1
        self._kvs = {}
        self._tombstones = {}
        self._kvs_index = 0
        self._sessions = {}
        self._sessions_index = 0
        self._lock_delay = {}
        # The agent's checks on our node, by ID: their status. A session is tied to some of them.
        self._checks = {SERF_CHECK: "passing"}
        self._reaping_paused = False
        self._leaderless = False
        self._closed = False
        self._reaper = threading.Thread(target=self._reap, name="ttl-reaper", daemon=True)
        self._reaper.start()

    # ---- Raft bookkeeping -------------------------------------------------------------------

    def _apply(self):
        self.raft_index += 1
        return self.raft_index

    def _wake(self):
        self._changed.notify_all()

    def wake_waiters(self):
        """Lets blocked queries re-check whether their connection has gone."""
        with self._lock:
            self._wake()

    # ---- KV -------------------------------------------------------------------------------

    def _set_txn(self, idx, entry, update_session):
        """kvsSetTxn: keeps CreateIndex, keeps the holder unless told otherwise, and does not
        write at all when nothing changed."""
        existing = self._kvs.get(entry.key)
        entry.create_index = existing.create_index if existing else idx
        if not update_session:
            entry.session = existing.session if existing else ""
        if existing and existing.same(entry):
            entry.modify_index = existing.modify_index
            return
        entry.modify_index = idx
        self._kvs[entry.key] = entry
        self._kvs_index = idx
        self._wake()

    def _delete_txn(self, idx, key):
        if self._kvs.pop(key, None) is not None:
            self._tombstones[key] = idx
            self._kvs_index = idx
            self._wake()

    def kv_set(self, key, value, flags):
        with self._lock:
            # A plain set carries LockIndex 0 from the request and keeps only the holder.
            self._set_txn(self._apply(), Entry(key, value, flags), False)
            return True

    def kv_cas(self, key, value, flags, cas):
        with self._lock:
            idx = self._apply()
            existing = self._kvs.get(key)
            if cas == 0 and existing is not None:
                return False
            if cas != 0 and (existing is None or existing.modify_index != cas):
                return False
            self._set_txn(idx, Entry(key, value, flags), False)
            return True

    def kv_lock(self, key, value, flags, session):
        with self._lock:
            # kvsPreApply enforces lock-delay on the leader before anything reaches Raft.
            if self._lock_delay.get(key, 0) > time.monotonic():
                return False
            idx = self._apply()
            if not session:
                raise RpcError("raft apply failed: missing session")
            if session not in self._sessions:
                raise RpcError(f'raft apply failed: invalid session "{session}"')
            entry = Entry(key, value, flags, session=session)
            existing = self._kvs.get(key)
            if existing is None:
                entry.lock_index = 1
            elif existing.session == session:
                entry.lock_index = existing.lock_index
            elif existing.session:
                return False
            else:
                entry.lock_index = existing.lock_index + 1
            self._set_txn(idx, entry, True)
            return True

    def kv_unlock(self, key, value, flags, session):
        """kvsUnlockTxn: the request's value and flags replace the stored ones, and no
        lock-delay starts, unlike an invalidation."""
        with self._lock:
            idx = self._apply()
            if not session:
                raise RpcError("raft apply failed: missing session")
            existing = self._kvs.get(key)
            if existing is None or existing.session != session:
                return False
            self._set_txn(idx, Entry(key, value, flags, lock_index=existing.lock_index), True)
            return True

    def kv_delete(self, key):
        with self._lock:
            self._delete_txn(self._apply(), key)
            return True

    def kv_delete_cas(self, key, cas):
        with self._lock:
            idx = self._apply()
            existing = self._kvs.get(key)
            if existing is None:
                return True  # kvsDeleteCASTxn returns entry == nil
            if existing.modify_index != cas:
                return False
            self._delete_txn(idx, key)
            return True

    def kv_delete_tree(self, prefix):
        with self._lock:
            idx = self._apply()
            doomed = [k for k in self._kvs if k.startswith(prefix)]
            for k in doomed:
                del self._kvs[k]
            if doomed:
                # One tombstone for the whole subtree; none when everything goes.
                if prefix:
                    self._tombstones[prefix] = idx
                self._kvs_index = idx
                self._wake()
            return True

    def kv_get(self, key):
        """(index, entry or None) as KVS.Get reports it: the entry's ModifyIndex, or the table's
        index when the key is missing. Call with the lock held (inside blocking_query)."""
        entry = self._kvs.get(key)
        if entry is not None:
            return entry.modify_index, dataclasses.replace(entry)
        return self._kvs_index, None

    def kv_list(self, prefix):
        """(index, entries) as kvsListTxn: the highest ModifyIndex or tombstone under the prefix,
        else the table's index. Call with the lock held."""
        entries = [dataclasses.replace(e) for k, e in sorted(self._kvs.items())
                   if k.startswith(prefix)]
        sub = max((e.modify_index for e in entries), default=0)
        if prefix:
            sub = max([sub] + [i for k, i in self._tombstones.items() if k.startswith(prefix)])
        else:
            sub = self._kvs_index
        return (sub or self._kvs_index), entries

    def kv_snapshot(self):
        with self._lock:
            return [dataclasses.replace(e) for _, e in sorted(self._kvs.items())]

    # ---- Sessions -----------------------------------------------------------------------------

    def _arm(self, s):
        s.deadline = None
        if s.ttl_ns:
            s.deadline = time.monotonic() + s.ttl_ns * self.ttl_multiplier / SECOND
        self._reaper_wake.notify_all()

    def session_create(self, name, node, lock_delay, behavior, ttl, ttl_ns,
                       node_checks, service_checks, checks):
        with self._lock:
            sid = str(uuid.uuid4())
            while sid in self._sessions:
                sid = str(uuid.uuid4())
            idx = self._apply()
            if node.lower() != self.node.lower():
                raise RpcError("apply failed: Missing node registration")
            # sessionCreateTxn: every check the session names must be there, and not critical.
            for check in _check_ids(node_checks, service_checks, checks):
                if check not in self._checks:
                    raise RpcError(f"apply failed: Missing check '{check}' registration")
                if self._checks[check] == "critical":
                    raise RpcError(f"apply failed: Check '{check}' is in critical state")
            s = Session(sid, name, node, lock_delay, behavior, ttl, ttl_ns, node_checks,
                        service_checks, checks, idx, idx)
            self._sessions[sid] = s
            self._sessions_index = idx
            self._arm(s)
            self._wake()
            return sid

    def set_check(self, check, status):
        """Registers or updates an agent check on our node; one gone critical invalidates every
        session tied to it (checkSessionsTxn)."""
        with self._lock:
            self._checks[check] = status
            if status == "critical":
                for sid in [sid for sid, s in self._sessions.items()
                            if check in _check_ids(s.node_checks, s.service_checks, s.checks)]:
                    self._invalidate(sid)

    def session_destroy(self, sid):
        with self._lock:
            if sid in self._sessions:
                self._invalidate(sid)

    def _invalidate(self, sid):
        """deleteSessionTxn: release or delete every key the session holds, and start each key's
        lock-delay (capped at 60s) from this moment."""
        idx = self._apply()
        s = self._sessions.pop(sid)
        self._sessions_index = idx
        delay = min(s.lock_delay, MAX_LOCK_DELAY)
        now = time.monotonic()
        for key in sorted(k for k, e in self._kvs.items() if e.session == sid):
            if s.behavior == "delete":
                self._delete_txn(idx, key)
            else:
                self._set_txn(idx, dataclasses.replace(self._kvs[key], session=""), True)
            if delay > 0:
                self._lock_delay[key] = now + delay / SECOND
        self._wake()

    def session_renew(self, sid):
        """Session.Renew: only the timer moves; nothing is written, so no index changes."""
        with self._lock:
            s = self._sessions.get(sid)
            if s is None:
                return None
            self._arm(s)
            return dataclasses.replace(s)

    def session_lookup(self, sid):
        with self._lock:
            s = self._sessions.get(sid)
            return dataclasses.replace(s) if s else None

    def session_get(self, sid):
        """(index, session or None). Call with the lock held."""
        s = self._sessions.get(sid)
        return self._sessions_index, (dataclasses.replace(s) if s else None)

    def session_list(self, node=None):
        """(index, sessions ordered by ID, optionally of one node). Call with the lock held."""
        found = [dataclasses.replace(s) for _, s in sorted(self._sessions.items())
                 if node is None or s.node.lower() == node.lower()]
        return self._sessions_index, found

    # ---- TTL timers ---------------------------------------------------------------------------

    def _reap(self):
        with self._lock:
            while not self._closed:
                timeout = None
                if not (self._reaping_paused or self._leaderless):
                    now = time.monotonic()
                    for s in list(self._sessions.values()):
                        if s.deadline is not None and s.deadline <= now:
                            self._invalidate(s.id)
                    deadlines = [s.deadline for s in self._sessions.values()
                                 if s.deadline is not None]
                    if deadlines:
                        timeout = max(0.0, min(deadlines) - time.monotonic())
                self._reaper_wake.wait(timeout)

    def pause_reaping(self, paused):
        """While paused no session expires; on resume those past their deadline go at once."""
        with self._lock:
            self._reaping_paused = paused
            self._reaper_wake.notify_all()

    @property
    def reaping_paused(self):
        return self._reaping_paused

    def lose_leader(self):
        """A leader stepping down stops every timer (clearAllSessionTimers)."""
        with self._lock:
            self._leaderless = True

    def elect_leader(self):
        """A new leader restarts every session's full TTL (initializeSessionTimers)."""
        with self._lock:
            self._leaderless = False
            for s in self._sessions.values():
                self._arm(s)

    def close(self):
        with self._lock:
            self._closed = True
            self._reaper_wake.notify_all()
            self._wake()

    # ---- Blocking queries ---------------------------------------------------------------------

    def blocking_query(self, min_index, wait_ns, run, gone):
        """agent/blockingquery Query: answer at once when min_index is 0, else run the query
        again after every change until its index passes min_index or the wait (plus jitter)
        runs out. A query that keeps finding nothing keeps waiting even when unrelated writes
        raise the table index. run() returns (index, result, not_found) with the lock held.
        Returns (index, result), or None when gone() says the caller's connection was lost."""
        with self._lock:
            if min_index == 0:
                idx, result, _ = run()
                return max(idx, 1), result
            deadline = time.monotonic() + query_timeout(wait_ns)
            seen_missing = False
            while True:
                idx, result, missing = run()
                idx = max(idx, 1)
                if missing:
                    if seen_missing:
                        min_index = idx
                    seen_missing = True
                if idx > min_index:
                    return idx, result
                remaining = deadline - time.monotonic()
                if gone() or self._closed:
                    return None
                if remaining <= 0:
                    return idx, result
                self._changed.wait(remaining)
