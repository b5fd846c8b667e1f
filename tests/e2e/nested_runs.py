"""A run inside a run on a backend: a child of lock that runs lock on the prefix its ancestor
holds runs its own child at once, rather than waiting behind its own ancestor forever; the
variables alone, without that ancestor holding, do not count. test_operators.py runs these on
the local backend, test_etcd.py on etcd."""

import json
import os

from harness import LOCK, wait_for


class NestedRuns:
    """The case gives self.prefix and self.env (the backend's environment)."""

    def test_a_run_inside_a_run_on_the_same_prefix_runs_at_once(self):
        inner = f'{LOCK} -verbose {self.prefix} \'echo "inner $LOCK_FENCING_TOKEN"; exit 3\''
        r = self.run_lock(self.prefix, f'echo "outer $LOCK_FENCING_TOKEN"; {inner}; echo "inner exited $?"',
                          timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        outer, inner_line, exited = r.stdout.splitlines()
        token = outer.split()[1]
        # The inner child runs within the outer hold, with its token, in lock's place: its status
        # is the inner lock's.
        self.assertEqual((inner_line, exited), (f"inner {token}", "inner exited 3"))
        self.assertRegex(r.stderr, rf"prefix '{self.prefix}' is held by an enclosing lock, one of our "
                                   rf"ancestors \(pid \d+ on [^\n]+, fencing token {token}\): running "
                                   r"the child at once, within that hold\n")

    def test_the_variables_without_an_enclosing_holder_do_not_count(self):
        """A process that only inherited the variables (a daemon a child started, say) waits
        like any other: the holder it names is no ancestor of its."""
        env_file = self.path("env")
        holder = self.hold(prefix=self.prefix, before=f"env > {env_file}; ")
        with open(env_file) as f:
            inherited = dict(line.split("=", 1) for line in f.read().splitlines()
                             if line.startswith(("LOCK_", "CONSUL_LOCK_HELD", "ETCD_LOCK_")))
        self.assertEqual(inherited["LOCK_PREFIX"], self.prefix)
        r = self.run_lock("-timeout", "300ms", "-conflict-exit-code", "75", self.prefix,
                          "touch " + self.path("ran"), env=dict(self.env, **inherited))
        self.assertEqual(r.returncode, 75, r.stderr)
        self.assertFalse(os.path.exists(self.path("ran")))
        self.release()
        self.assert_succeeds(holder)
        # And once nobody holds the prefix, such a process takes it as anyone would.
        r = self.run_lock(self.prefix, "touch " + self.path("ran"), env=dict(self.env, **inherited))
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        wait_for(lambda: os.path.exists(self.path("ran")), 5, "the child to run")
        self.assertEqual(json.loads(self.run_lock("-status", "-json", self.prefix).stdout)["holders"], [])
