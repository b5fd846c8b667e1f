#!/usr/bin/env python3
"""A Python port of Consul's Go client recipes api.Lock (api/lock.go) and api.Semaphore
(api/semaphore.go), and of the `consul lock` command around them (command/lock/lock.go), so that
end-to-end tests can run the reference client's behaviour side by side with `lock`.

    consul_peer.py [-http-addr ADDR] [-n N] [-name NAME] [-timeout DUR] [-monitor-retry N]
                   [-token T] [-ca-file F] [-client-cert F] [-client-key F] [-shell=false]
                   [-pass-stdin] [-child-exit-code] PREFIX [--] child...

Flags parse as Go's flag package does (-flag or --flag, -flag=value or -flag value); parsing
stops at PREFIX. Unlike `consul lock`, a "--" right after PREFIX is dropped, so a test can write
`PREFIX -- cmd`. Each part names the Go function it mirrors."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

from consul_api import Client, KVPair, QueryOptions, is_retryable_error, path_join
from godur import parse_duration


def _start_thread(target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


# ---- api/lock.go ----------------------------------------------------------------------------

DEFAULT_LOCK_SESSION_NAME = "Consul API Lock"
DEFAULT_LOCK_SESSION_TTL = "15s"
DEFAULT_LOCK_WAIT_TIME = 15.0
DEFAULT_LOCK_RETRY_TIME = 5.0
DEFAULT_MONITOR_RETRY_TIME = 2.0
LOCK_FLAG_VALUE = 0x2DDCCBC058A50C18

ERR_LOCK_HELD = "Lock already held"
ERR_LOCK_NOT_HELD = "Lock not held"
ERR_LOCK_IN_USE = "Lock in use"
ERR_LOCK_CONFLICT = "Existing key does not match lock use"


class RecipeError(Exception):
    pass


class Lock:
    """api.Lock, built as Client.LockOpts builds it."""

    def __init__(self, client, key, value=None, session_name="", session_ttl="",
                 monitor_retries=0, monitor_retry_time=0.0, lock_wait_time=0.0,
                 lock_try_once=False):
        if not key:
            raise RecipeError("missing key")
        if session_ttl:
            try:
                parse_duration(session_ttl)
            except ValueError as e:
                raise RecipeError(f"invalid SessionTTL: {e}") from None
        self.c, self.key, self.value = client, key, value
        self.session_name = session_name or DEFAULT_LOCK_SESSION_NAME
        self.session_ttl = session_ttl or DEFAULT_LOCK_SESSION_TTL
        self.monitor_retries = monitor_retries
        self.monitor_retry_time = monitor_retry_time or DEFAULT_MONITOR_RETRY_TIME
        self.lock_wait_time = lock_wait_time or DEFAULT_LOCK_WAIT_TIME
        self.lock_try_once = lock_try_once
        self.is_held = False
        self.session_renew = None
        self.renewer = None
        self.lock_session = ""
        self._l = threading.Lock()

    def _lock_entry(self, session):
        """Lock.lockEntry."""
        return KVPair(self.key, self.value, LOCK_FLAG_VALUE, session)

    def lock(self, stop):
        """Lock.Lock: returns an Event set when the lock is lost, or None when stop was set
        (or the one-shot wait ran out) before it was acquired."""
        with self._l:
            if self.is_held:
                raise RecipeError(ERR_LOCK_HELD)
            try:
                self.lock_session = self.c.session_create(self.session_name, self.session_ttl)
            except Exception as e:
                raise RecipeError(f"failed to create session: {e}") from None
            self.session_renew = threading.Event()
            self.renewer = _start_thread(self.c.session_renew_periodic, self.session_ttl,
                                         self.lock_session, self.session_renew)
            try:
                return self._acquire(stop)
            finally:
                # If we fail to acquire the lock, cleanup the session.
                if not self.is_held:
                    self.session_renew.set()
                    self.session_renew = None

    def _acquire(self, stop):
        q = QueryOptions(wait_time=self.lock_wait_time)
        start = time.monotonic()
        attempts = 0
        while True:  # WAIT:
            if stop.is_set():
                return None
            if self.lock_try_once and attempts > 0:
                elapsed = time.monotonic() - start
                if elapsed > self.lock_wait_time:
                    return None
                q.wait_time = self.lock_wait_time - elapsed
            attempts += 1
            try:
                pair, last_index = self.c.kv_get(self.key, q)
            except Exception as e:
                raise RecipeError(f"failed to read lock: {e}") from None
            if pair is not None and pair.flags != LOCK_FLAG_VALUE:
                raise RecipeError(ERR_LOCK_CONFLICT)
            if pair is not None and pair.session == self.lock_session:
                return self._held()
            if pair is not None and pair.session:
                q.wait_index = last_index
                continue
            try:
                locked = self.c.kv_acquire(self._lock_entry(self.lock_session))
            except Exception as e:
                raise RecipeError(f"failed to acquire lock: {e}") from None
            if locked:
                return self._held()
            # Determine why the lock failed.
            q.wait_index = 0
            try:
                pair, last_index = self.c.kv_get(self.key, q)
            except Exception as e:
                raise RecipeError(str(e)) from None
            if pair is not None and pair.session:
                q.wait_index = last_index  # someone holds it: a blocking query can wait
                continue
            # Free, yet refused: a lock-delay is in effect, so wait on a timer.
            if stop.wait(DEFAULT_LOCK_RETRY_TIME):
                return None

    def _held(self):
        """Lock.Lock, HELD: watch to ensure we maintain leadership."""
        lost = threading.Event()
        _start_thread(self._monitor_lock, self.lock_session, lost)
        self.is_held = True
        return lost

    def unlock(self):
        """Lock.Unlock: release the key, then stop renewing (which destroys the session)."""
        with self._l:
            if not self.is_held:
                raise RecipeError(ERR_LOCK_NOT_HELD)
            self.is_held = False
            entry = self._lock_entry(self.lock_session)
            self.lock_session = ""
            try:
                self.c.kv_release(entry)
            except Exception as e:
                raise RecipeError(f"failed to release lock: {e}") from None
            finally:
                if self.session_renew is not None:
                    self.session_renew.set()
                    self.session_renew = None

    def destroy(self):
        """Lock.Destroy: remove the key unless someone holds it."""
        with self._l:
            if self.is_held:
                raise RecipeError(ERR_LOCK_HELD)
            try:
                pair, _ = self.c.kv_get(self.key)
            except Exception as e:
                raise RecipeError(f"failed to read lock: {e}") from None
            if pair is None:
                return
            if pair.flags != LOCK_FLAG_VALUE:
                raise RecipeError(ERR_LOCK_CONFLICT)
            if pair.session:
                raise RecipeError(ERR_LOCK_IN_USE)
            try:
                removed = self.c.kv_delete_cas(pair)
            except Exception as e:
                raise RecipeError(f"failed to remove lock: {e}") from None
            if not removed:
                raise RecipeError(ERR_LOCK_IN_USE)

    def _monitor_lock(self, session, lost):
        """Lock.monitorLock: consistent blocking reads for as long as our session holds the
        key, riding out up to monitor_retries retryable errors in a row."""
        q = QueryOptions(require_consistent=True)
        try:
            while True:  # WAIT:
                retries = self.monitor_retries
                while True:  # RETRY:
                    try:
                        pair, last_index = self.c.kv_get(self.key, q)
                        break
                    except Exception as e:
                        if retries > 0 and is_retryable_error(e):
                            time.sleep(self.monitor_retry_time)
                            retries -= 1
                            q.wait_index = 0
                            continue
                        return
                if pair is not None and pair.session == session:
                    q.wait_index = last_index
                    continue
                return
        finally:
            lost.set()


# ---- api/semaphore.go -------------------------------------------------------------------------

DEFAULT_SEMAPHORE_SESSION_NAME = "Consul API Semaphore"
DEFAULT_SEMAPHORE_SESSION_TTL = "15s"
DEFAULT_SEMAPHORE_WAIT_TIME = 15.0
DEFAULT_SEMAPHORE_KEY = ".lock"
SEMAPHORE_FLAG_VALUE = 0xE0F69A2BAA414DE0

ERR_SEMAPHORE_HELD = "Semaphore already held"
ERR_SEMAPHORE_NOT_HELD = "Semaphore not held"
ERR_SEMAPHORE_IN_USE = "Semaphore in use"
ERR_SEMAPHORE_CONFLICT = "Existing key does not match semaphore use"


class Semaphore:
    """api.Semaphore, built as Client.SemaphoreOpts builds it."""

    def __init__(self, client, prefix, limit, value=None, session_name="", session_ttl="",
                 monitor_retries=0, monitor_retry_time=0.0, semaphore_wait_time=0.0,
                 semaphore_try_once=False):
        if not prefix:
            raise RecipeError("missing prefix")
        if limit <= 0:
            raise RecipeError("semaphore limit must be positive")
        if session_ttl:
            try:
                parse_duration(session_ttl)
            except ValueError as e:
                raise RecipeError(f"invalid SessionTTL: {e}") from None
        self.c, self.prefix, self.limit, self.value = client, prefix, limit, value
        self.session_name = session_name or DEFAULT_SEMAPHORE_SESSION_NAME
        self.session_ttl = session_ttl or DEFAULT_SEMAPHORE_SESSION_TTL
        self.monitor_retries = monitor_retries
        self.monitor_retry_time = monitor_retry_time or DEFAULT_MONITOR_RETRY_TIME
        self.semaphore_wait_time = semaphore_wait_time or DEFAULT_SEMAPHORE_WAIT_TIME
        self.semaphore_try_once = semaphore_try_once
        self.is_held = False
        self.session_renew = None
        self.renewer = None
        self.lock_session = ""
        self._l = threading.Lock()

    def _lock_key(self):
        return path_join(self.prefix, DEFAULT_SEMAPHORE_KEY)

    def acquire(self, stop):
        """Semaphore.Acquire: returns an Event set when the slot is lost, or None when stop
        was set (or the one-shot wait ran out) first."""
        with self._l:
            if self.is_held:
                raise RecipeError(ERR_SEMAPHORE_HELD)
            try:
                self.lock_session = self.c.session_create(
                    self.session_name, self.session_ttl, behavior="delete")
            except Exception as e:
                raise RecipeError(f"failed to create session: {e}") from None
            self.session_renew = threading.Event()
            self.renewer = _start_thread(self.c.session_renew_periodic, self.session_ttl,
                                         self.lock_session, self.session_renew)
            try:
                return self._acquire(stop)
            finally:
                if not self.is_held:
                    self.session_renew.set()
                    self.session_renew = None

    def _acquire(self, stop):
        # Create the contender entry.
        err = None
        try:
            made = self.c.kv_acquire(self._contender_entry(self.lock_session))
        except Exception as e:
            made, err = False, e
        if err is not None or not made:
            raise RecipeError(f"failed to make contender entry: {err if err else '<nil>'}")
        q = QueryOptions(wait_time=self.semaphore_wait_time)
        start = time.monotonic()
        attempts = 0
        while True:  # WAIT:
            if stop.is_set():
                return None
            if self.semaphore_try_once and attempts > 0:
                elapsed = time.monotonic() - start
                if elapsed > q.wait_time:
                    return None
                q.wait_time -= elapsed  # as Go does, from the query's own remaining wait
            attempts += 1
            try:
                pairs, last_index = self.c.kv_list(self.prefix, q)
            except Exception as e:
                raise RecipeError(f"failed to read prefix: {e}") from None
            lock_pair = self._find_lock(pairs)
            if lock_pair.flags != SEMAPHORE_FLAG_VALUE:
                raise RecipeError(ERR_SEMAPHORE_CONFLICT)
            lock = self._decode_lock(lock_pair)
            if lock["Limit"] != self.limit:
                raise RecipeError(f"semaphore limit conflict (lock: {lock['Limit']}, "
                                  f"local: {self.limit})")
            self._prune_dead_holders(lock, pairs)
            if len(lock["Holders"]) >= lock["Limit"]:
                q.wait_index = last_index
                continue
            lock["Holders"][self.lock_session] = True
            new_lock = self._encode_lock(lock, lock_pair.modify_index)
            try:
                did_set = self.c.kv_cas(new_lock)
            except Exception as e:
                raise RecipeError(f"failed to update lock: {e}") from None
            if not did_set:
                continue  # a race with another contender: read again
            lost = threading.Event()
            _start_thread(self._monitor_lock, self.lock_session, lost)
            self.is_held = True
            return lost

    def release(self):
        """Semaphore.Release: take our session out of Holders by CAS, then delete our
        contender key; stopping the renewal destroys the session."""
        with self._l:
            if not self.is_held:
                raise RecipeError(ERR_SEMAPHORE_NOT_HELD)
            self.is_held = False
            lock_session, self.lock_session = self.lock_session, ""
            try:
                self._release(lock_session)
            finally:
                if self.session_renew is not None:
                    self.session_renew.set()
                    self.session_renew = None

    def _release(self, lock_session):
        key = self._lock_key()
        while True:  # READ:
            pair, _ = self.c.kv_get(key)
            if pair is None:
                pair = KVPair("")
            lock = self._decode_lock(pair)
            if lock_session not in lock["Holders"]:
                break
            del lock["Holders"][lock_session]
            new_lock = self._encode_lock(lock, pair.modify_index)
            try:
                did_set = self.c.kv_cas(new_lock)
            except Exception as e:
                raise RecipeError(f"failed to update lock: {e}") from None
            if did_set:
                break
        self.c.kv_delete(path_join(self.prefix, lock_session))

    def destroy(self):
        """Semaphore.Destroy: remove the coordinating key once nobody alive holds a slot."""
        with self._l:
            if self.is_held:
                raise RecipeError(ERR_SEMAPHORE_HELD)
            try:
                pairs, _ = self.c.kv_list(self.prefix)
            except Exception as e:
                raise RecipeError(f"failed to read prefix: {e}") from None
            lock_pair = self._find_lock(pairs)
            if lock_pair.modify_index == 0:
                return
            if lock_pair.flags != SEMAPHORE_FLAG_VALUE:
                raise RecipeError(ERR_SEMAPHORE_CONFLICT)
            lock = self._decode_lock(lock_pair)
            self._prune_dead_holders(lock, pairs)
            if lock["Holders"]:
                raise RecipeError(ERR_SEMAPHORE_IN_USE)
            try:
                removed = self.c.kv_delete_cas(lock_pair)
            except Exception as e:
                raise RecipeError(f"failed to remove semaphore: {e}") from None
            if not removed:
                raise RecipeError(ERR_SEMAPHORE_IN_USE)

    def _contender_entry(self, session):
        """Semaphore.contenderEntry."""
        return KVPair(path_join(self.prefix, session), self.value, SEMAPHORE_FLAG_VALUE, session)

    def _find_lock(self, pairs):
        """Semaphore.findLock: a missing key reads as an empty one with the right flags."""
        for pair in pairs or []:
            if pair.key == self._lock_key():
                return pair
        return KVPair("", flags=SEMAPHORE_FLAG_VALUE)

    def _decode_lock(self, pair):
        """Semaphore.decodeLock: {"Limit": N, "Holders": {session: true}}; field names match
        case-insensitively as encoding/json does."""
        if pair is None or pair.value is None:
            return {"Limit": self.limit, "Holders": {}}
        try:
            raw = json.loads(pair.value)
            fields = {k.lower(): v for k, v in raw.items()}
            limit, holders = fields.get("limit", 0), fields.get("holders") or {}
            if not isinstance(limit, int) or not isinstance(holders, dict):
                raise ValueError("json: cannot unmarshal into Go struct field semaphoreLock")
        except (ValueError, AttributeError) as e:
            raise RecipeError(f"lock decoding failed: {e}") from None
        return {"Limit": limit, "Holders": dict(holders)}

    def _encode_lock(self, lock, old_index):
        """Semaphore.encodeLock: json.Marshal, so the Holders map comes out with sorted keys."""
        enc = json.dumps({"Limit": lock["Limit"], "Holders": lock["Holders"]},
                         separators=(",", ":"), sort_keys=True)
        return KVPair(self._lock_key(), enc.encode(), SEMAPHORE_FLAG_VALUE,
                      modify_index=old_index)

    @staticmethod
    def _prune_dead_holders(lock, pairs):
        """Semaphore.pruneDeadHolders: a holder is alive while some key is held by its session."""
        alive = {p.session for p in pairs or [] if p.session}
        for holder in list(lock["Holders"]):
            if holder not in alive:
                del lock["Holders"][holder]

    def _monitor_lock(self, session, lost):
        """Semaphore.monitorLock."""
        q = QueryOptions(require_consistent=True)
        try:
            while True:  # WAIT:
                retries = self.monitor_retries
                while True:  # RETRY:
                    try:
                        pairs, last_index = self.c.kv_list(self.prefix, q)
                        break
                    except Exception as e:
                        if retries > 0 and is_retryable_error(e):
                            time.sleep(self.monitor_retry_time)
                            retries -= 1
                            q.wait_index = 0
                            continue
                        return
                try:
                    lock = self._decode_lock(self._find_lock(pairs))
                except RecipeError:
                    return
                self._prune_dead_holders(lock, pairs)
                if session in lock["Holders"]:
                    q.wait_index = last_index
                    continue
                return
        finally:
            lost.set()


# ---- command/lock/lock.go ---------------------------------------------------------------------

LOCK_KILL_GRACE_PERIOD = 5.0
DEFAULT_MONITOR_RETRY = 3
COMMAND_MONITOR_RETRY_TIME = 1.0  # the command's defaultMonitorRetryTime, not the API's

_FLAGS = {  # name -> (kind, default)
    "child-exit-code": ("bool", False), "n": ("int", 1),
    "monitor-retry": ("int", DEFAULT_MONITOR_RETRY), "name": ("str", ""),
    "pass-stdin": ("bool", False), "shell": ("bool", True), "timeout": ("dur", 0.0),
    "try": ("dur", 0.0), "verbose": ("bool", False),
    "http-addr": ("str", os.environ.get("CONSUL_HTTP_ADDR", "127.0.0.1:8500")),
    "token": ("str", os.environ.get("CONSUL_HTTP_TOKEN", "")),
    "ca-file": ("str", os.environ.get("CONSUL_CACERT", "")),
    "client-cert": ("str", os.environ.get("CONSUL_CLIENT_CERT", "")),
    "client-key": ("str", os.environ.get("CONSUL_CLIENT_KEY", "")),
}


class UsageError(Exception):
    pass


def _parse_flags(argv):
    """Go's flag package: flags until the first non-flag argument or "--"."""
    values = {name: default for name, (_, default) in _FLAGS.items()}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        name, has_value, value = arg.lstrip("-").partition("=")
        if name not in _FLAGS:
            raise UsageError(f"flag provided but not defined: -{name}")
        kind = _FLAGS[name][0]
        if kind == "bool":
            if has_value and value.lower() not in ("1", "t", "true", "0", "f", "false"):
                raise UsageError(f'invalid boolean value "{value}" for -{name}')
            value = value.lower() in ("1", "t", "true") if has_value else True
        else:
            if not has_value:
                i += 1
                if i >= len(argv):
                    raise UsageError(f"flag needs an argument: -{name}")
                value = argv[i]
            try:
                value = int(value) if kind == "int" else (
                    parse_duration(value) / 1e9 if kind == "dur" else value)
            except ValueError:
                raise UsageError(f'invalid value "{value}" for flag -{name}') from None
        values["timeout" if name == "try" else name] = value
        i += 1
    return values, argv[i:]


class LockCommand:
    def __init__(self):
        self.shutdown = threading.Event()
        self.wake = threading.Event()
        self.child = None

    def error(self, msg):
        print(msg, file=sys.stderr, flush=True)

    def info(self, msg):
        if self.verbose:
            print(msg, flush=True)

    def _on_signal(self, signum, _frame):
        # The CLI's shutdown channel, and agent.ForwardSignals passing it on to the child.
        self.shutdown.set()
        self.wake.set()
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)

    def run(self, argv):
        """cmd.run."""
        try:
            flags, extra = _parse_flags(argv)
        except UsageError as e:
            self.error(str(e))
            return 1
        self.verbose = flags["verbose"]
        if flags["n"] <= 0:
            self.error("Lock holder limit must be positive")
            return 1
        if len(extra) >= 2 and extra[1] == "--":
            extra = extra[:1] + extra[2:]
        if len(extra) < 2:
            self.error("Key prefix and child command must be specified")
            return 1
        prefix = extra[0][1:] if extra[0].startswith("/") else extra[0]
        if flags["timeout"] < 0:
            self.error("Timeout must be positive")
            return 1
        name = flags["name"] or f"Consul lock for '{' '.join(extra[1:])}' at '{prefix}'"
        oneshot = flags["timeout"] > 0
        if flags["monitor-retry"] < 0:
            self.error("Number for 'monitor-retry' must be >= 0")
            return 1
        client = Client(flags["http-addr"], flags["token"], flags["ca-file"],
                        flags["client-cert"], flags["client-key"])
        try:
            client.agent_node_name()
        except Exception as e:
            self.error(f"Error querying Consul agent: {e}")
            return 1
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        try:
            if flags["n"] == 1:
                lu = self.setup_lock(client, prefix, name, oneshot, flags["timeout"],
                                     flags["monitor-retry"])
            else:
                lu = self.setup_semaphore(client, flags["n"], prefix, name, oneshot,
                                          flags["timeout"], flags["monitor-retry"])
        except RecipeError as e:
            self.error(f"Lock setup failed: {e}")
            return 1
        lock_fn, unlock_fn, cleanup_fn, in_use_err, recipe = lu
        try:
            return self._acquire_and_run(extra[1:], flags, lock_fn, unlock_fn, cleanup_fn,
                                         in_use_err)
        finally:
            # Go leaves the renewer's session destroy racing the process exit; waiting for it
            # keeps runs from leaving sessions behind for the next test.
            if recipe.renewer is not None:
                recipe.renewer.join(5)

    def _acquire_and_run(self, args, flags, lock_fn, unlock_fn, cleanup_fn, in_use_err):
        """cmd.run, from the acquisition on."""
        self.info("Attempting lock acquisition")
        try:
            lost = lock_fn(self.shutdown)
        except Exception as e:
            self.error(f"Lock acquisition failed: {e}")
            return 1
        if lost is None:
            self.error("Shutdown triggered or timeout during lock acquisition")
            return 1
        code = self._hold(args, flags, lost)
        try:
            unlock_fn()
        except Exception as e:
            self.error(f"Lock release failed: {e}")
            return 1
        try:
            cleanup_fn()
            self.info("Cleanup succeeded")
        except Exception as e:
            if str(e) != in_use_err:
                self.error(f"Lock cleanup failed: {e}")
                return 1
            self.info("Cleanup aborted, lock in use")
        return code if flags["child-exit-code"] else 0

    def _hold(self, args, flags, lost):
        """From acquisition to the child's end: returns the child exit code to propagate."""
        if self.shutdown.is_set():
            self.error("Shutdown triggered during lock acquisition")
            return 0
        threading.Thread(target=lambda: (lost.wait(), self.wake.set()), daemon=True).start()
        try:
            self.child = self.start_child(args, flags["pass-stdin"], flags["shell"])
        except OSError as e:
            self.error(f"Error starting handler: {e}")
            return 2
        done = threading.Event()

        def wait_child():
            # startChild's own report, whether the child ended by itself or was killed.
            if self.child.wait() != 0:
                self.error(f"Error running handler: {_exit_text(self.child.returncode)}")
            done.set()
            self.wake.set()
        threading.Thread(target=wait_child, daemon=True).start()
        self.wake.wait()
        if done.is_set():
            self.info("Child terminated, releasing lock")
            return 2 if self.child.returncode != 0 else 0
        self.info("Shutdown triggered, killing child" if self.shutdown.is_set()
                  else "Lock lost, killing child")
        self.kill_child(done)
        return 0

    def start_child(self, args, pass_stdin, shell):
        """cmd.startChild: agent.ExecScript runs "$SHELL -c <args joined>" (/bin/sh without
        SHELL); agent.ExecSubprocess runs the words as they are."""
        if shell:
            argv = [os.environ.get("SHELL") or "/bin/sh", "-c", " ".join(args)]
        else:
            argv = list(args)
        self.info("Starting handler")
        env = dict(os.environ, CONSUL_LOCK_HELD="true")
        return subprocess.Popen(argv, env=env, stdin=None if pass_stdin else subprocess.DEVNULL)

    def kill_child(self, done):
        """cmd.killChild: SIGTERM, then SIGKILL after the grace period."""
        try:
            self.child.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            return
        if not done.wait(LOCK_KILL_GRACE_PERIOD):
            self.info(f"Killing child pid {self.child.pid}")
            try:
                self.child.send_signal(signal.SIGKILL)
            except ProcessLookupError:
                pass
            done.wait()

    def setup_lock(self, client, prefix, name, oneshot, wait, retry):
        """cmd.setupLock: the lock lives at <prefix>/.lock so that a lock and a semaphore on one
        prefix meet on the same key and report a conflict."""
        key = path_join(prefix, DEFAULT_SEMAPHORE_KEY)
        self.info(f"Setting up lock at path: {key}")
        lock = Lock(client, key, session_name=name, monitor_retries=retry,
                    monitor_retry_time=COMMAND_MONITOR_RETRY_TIME,
                    lock_wait_time=wait if oneshot else 0.0, lock_try_once=oneshot)
        return lock.lock, lock.unlock, lock.destroy, ERR_LOCK_IN_USE, lock

    def setup_semaphore(self, client, limit, prefix, name, oneshot, wait, retry):
        """cmd.setupSemaphore."""
        self.info(f"Setting up semaphore (limit {limit}) at prefix: {prefix}")
        sem = Semaphore(client, prefix, limit, session_name=name, monitor_retries=retry,
                        monitor_retry_time=COMMAND_MONITOR_RETRY_TIME,
                        semaphore_wait_time=wait if oneshot else 0.0,
                        semaphore_try_once=oneshot)
        return sem.acquire, sem.release, sem.destroy, ERR_SEMAPHORE_IN_USE, sem


def _exit_text(rc):
    """How Go's exec.ExitError reads."""
    return f"signal: {signal.Signals(-rc).name[3:].lower()}" if rc < 0 else f"exit status {rc}"


if __name__ == "__main__":
    sys.exit(LockCommand().run(sys.argv[1:]))
