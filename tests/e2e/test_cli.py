"""The command line: every bad input is one line on stderr, exit status 1, and no child; the Go flag
syntax that `consul lock` users write is accepted and means what it means there."""

import json
import os
import re
import time
import unittest

from harness import LockTestCase, wait_for

# Every flag a user can give; the usage text must mention each of them.
FLAGS = ["n", "name", "monitor-retry", "timeout", "try", "shell", "pass-stdin", "child-exit-code",
         "preserve-status", "kill-after", "verbose", "backend", "state-dir", "version",
         "http-addr", "token", "token-file", "ca-file", "ca-path", "client-cert", "client-key",
         "tls-server-name", "datacenter", "stale"]

TRUE_WORDS = ["1", "t", "T", "TRUE", "true", "True"]
FALSE_WORDS = ["0", "f", "F", "FALSE", "false", "False"]

# With the shell the two spaces are lost to word splitting; exec'd directly they arrive intact.
SPACED = ["echo", "a  b"]
VIA_SHELL, DIRECT = "a b\n", "a  b\n"


class BadInputTest(LockTestCase):

    def reject(self, args, expected, child=True, env=None):
        """Runs lock with `args` (and a child that would leave a mark) and checks that it fails
        with exactly the line `expected` (a str, or a compiled pattern for the whole line)."""
        marker = self.path("child-ran")
        argv = [*args, "touch", marker] if child else list(args)
        r = self.run_lock(*argv, env=env)
        self.assertEqual(r.returncode, 1, f"lock {argv}: {r.stderr}")
        self.assertEqual(r.stdout, "")
        if isinstance(expected, str):
            self.assertEqual(r.stderr, f"lock: {expected}\n", f"lock {argv}")
        else:
            self.assertRegex(r.stderr, expected, f"lock {argv}")
        self.assertEqual(r.stderr.count("\n"), 1, f"lock {argv}: not one line: {r.stderr!r}")
        self.assertFalse(os.path.exists(marker), f"lock {argv}: the child ran")
        self.assertFalse(os.path.exists(self.state), f"lock {argv}: touched the state directory")

    def usage(self, args, message, **kwargs):
        self.reject(args, f"{message} (see lock -help)", **kwargs)

    def test_missing_prefix_or_child(self):
        for args in ([], ["p"], ["-n", "2"], ["-n", "2", "p"], ["--"], ["--", "p"]):
            with self.subTest(args=args):
                self.usage(args, "Key prefix and child command must be specified", child=False)

    def test_limit_must_be_a_positive_integer(self):
        self.usage(["-n", "0", "p"], "Lock holder limit must be positive")
        self.usage(["-n", "-1", "p"], "Lock holder limit must be positive")
        self.usage(["-n=0", "p"], "Lock holder limit must be positive")
        self.usage(["-n", "abc", "p"], 'invalid value "abc" for flag -n: parse error')
        self.usage(["-n", "1.5", "p"], 'invalid value "1.5" for flag -n: parse error')

    def test_timeout_must_be_a_non_negative_go_duration(self):
        self.usage(["-timeout", "-1s", "p"], "Timeout must be positive")
        self.usage(["-timeout", "1", "p"],
                   'invalid value "1" for flag -timeout: time: missing unit in duration "1"')
        self.usage(["-timeout", "1d", "p"],
                   'invalid value "1d" for flag -timeout: time: unknown unit "d" in duration "1d"')
        self.usage(["-timeout=abc", "p"],
                   'invalid value "abc" for flag -timeout: time: invalid duration "abc"')

    def test_a_value_flag_at_the_end_needs_its_value(self):
        self.usage(["-timeout"], "flag needs an argument: -timeout", child=False)
        self.usage(["-n"], "flag needs an argument: -n", child=False)
        self.usage(["-shell=false", "--kill-after"], "flag needs an argument: -kill-after",
                   child=False)

    def test_unknown_flag(self):
        self.usage(["-bogus", "p"], "flag provided but not defined: -bogus")
        self.usage(["--bogus=1", "p"], "flag provided but not defined: -bogus")
        # Go has no single-letter bundling or abbreviations.
        self.usage(["-tim", "1s", "p"], "flag provided but not defined: -tim")

    def test_monitor_retry_must_not_be_negative(self):
        self.usage(["-monitor-retry", "-1", "p"], "Number for 'monitor-retry' must be >= 0")

    def test_kill_after_must_not_be_negative(self):
        self.reject(["-kill-after", "-1s", "p"],
                    re.compile(r"^lock: .*-kill-after.* \(see lock -help\)\n$"))

    def test_a_kill_after_that_leaves_no_time_to_renew_is_refused_before_connecting(self):
        # Nothing listens on port 1: the refusal comes before any attempt to connect.
        for backend in (["-backend", "etcd", "-endpoints", "http://127.0.0.1:1"],
                        ["-backend", "consul", "-http-addr", "127.0.0.1:1"]):
            with self.subTest(backend=backend[1]):
                self.usage([*backend, "-session-ttl", "10s", "-kill-after", "9s", "p"],
                           "-kill-after 9s does not fit in -session-ttl 10s: the child must be "
                           "dead within 9s of the last confirmed renewal (the TTL less a tenth) "
                           "and stopping it may take all of -kill-after; use a longer "
                           "-session-ttl or a shorter -kill-after")

    def test_a_monitor_retry_that_does_not_fit_is_said_once_and_the_rest_goes_on(self):
        # The budget is planned before connecting; the note comes first, then the failure to
        # reach a server that is not there.
        r = self.run_lock("-backend", "etcd", "-endpoints", "http://127.0.0.1:1", "-timeout", "1s",
                          "-monitor-retry", "100", "p", "true")
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.count("-monitor-retry 100 does not fit"), 1, r.stderr)

    def test_boolean_takes_only_go_boolean_words(self):
        self.usage(["-shell=maybe", "p"], 'invalid boolean value "maybe" for -shell: parse error')
        self.usage(["-verbose=yes", "p"], 'invalid boolean value "yes" for -verbose: parse error')
        self.usage(["-pass-stdin=", "p"], 'invalid boolean value "" for -pass-stdin: parse error')

    def test_bad_flag_syntax(self):
        self.usage(["---x", "p"], "bad flag syntax: ---x")
        self.usage(["-=x", "p"], "bad flag syntax: -=x")

    def test_bad_prefixes(self):
        cases = [
            ("", "the prefix must not be empty"),
            ("/abs", "prefix '/abs' must be relative (no leading '/')"),
            ("a/../b", "prefix 'a/../b' must not contain '.' or '..' components"),
            ("..", "prefix '..' must not contain '.' or '..' components"),
            (".", "prefix '.' must not contain '.' or '..' components"),
            ("a/./b", "prefix 'a/./b' must not contain '.' or '..' components"),
        ]
        for prefix, message in cases:
            with self.subTest(prefix=prefix):
                self.usage([prefix], message)
        with self.subTest(prefix="a//b"):
            self.reject(["a//b"], re.compile(
                r"^lock: prefix 'a//b' must not contain empty components \(see lock -help\)\n$"))
        for prefix in ("a\x01b", "a\x7fb", "\tx", "a\x1b[31mb"):
            with self.subTest(prefix=prefix):
                self.reject([prefix], re.compile(
                    r"^lock: prefix .* contains a control character \(see lock -help\)\n$"))

    # The message quotes the prefix as given, so a newline in it splits the one-line error.
    def test_prefix_with_a_newline_gets_a_one_line_error(self):
        self.reject(["a\nb"], re.compile(
            r"^lock: prefix .* contains a control character \(see lock -help\)\n$"))

    def test_unknown_backend(self):
        message = "unknown backend 'bogus' (choose local, consul, etcd, zookeeper or postgres)"
        self.usage(["-backend", "bogus", "p"], message)
        self.usage(["p"], message, env=dict(self.env, LOCK_BACKEND="bogus"))

    def test_zookeeper_connect_string_that_cannot_be_used(self):
        message = re.compile(r"^lock: cannot use the ZooKeeper endpoints '127.0.0.1:notaport': "
                             r"not host:port\[,host:port...\]\[/chroot\], or a host that does not resolve\n$")
        self.reject(["-backend", "zookeeper", "-endpoints", "127.0.0.1:notaport", "p"], message)
        self.reject(["p"], message, env=dict(self.env, LOCK_BACKEND="zookeeper",
                                             ZOOKEEPER_ENDPOINTS="127.0.0.1:notaport"))

    def test_api_flags_do_not_apply_to_the_local_backend(self):
        self.usage(["-backend", "local", "-http-addr", "x", "p"],
                   "-http-addr applies to the consul backend, not to -backend local")
        self.usage(["-http-addr", "x", "-backend=local", "p"],
                   "-http-addr applies to the consul backend, not to -backend local")
        self.usage(["-backend", "local", "-token", "secret", "p"],
                   "-token applies to the consul backend, not to -backend local")

    def test_network_flags_apply_only_to_their_backends(self):
        self.usage(["-endpoints", "http://127.0.0.1:2379", "-backend", "local", "p"],
                   "-endpoints applies to the etcd, zookeeper and postgres backends, not to -backend local")
        self.usage(["-backend", "etcd", "-lock-delay", "1s", "p"],
                   "-lock-delay applies to the consul backend, not to -backend etcd")
        self.usage(["-backend", "etcd", "-token", "t", "p"],
                   "-token applies to the consul backend, not to -backend etcd")
        self.usage(["-backend", "local", "-session-ttl", "20s", "p"],
                   "-session-ttl applies to the consul, etcd, zookeeper and postgres backends, not to -backend local")
        self.usage(["-backend", "local", "-value", "v", "p"],
                   "-value applies to the consul, etcd, zookeeper and postgres backends, not to -backend local")

    def test_session_ttl_bounds(self):
        # Consul's own bounds and wording; etcd counts leases in whole seconds.
        self.usage(["-backend", "consul", "-session-ttl", "5s", "p"],
                   "Invalid Session TTL '5s', must be between [10s=24h0m0s]")
        self.usage(["-backend", "consul", "-session-ttl", "25h", "p"],
                   "Invalid Session TTL '25h0m0s', must be between [10s=24h0m0s]")
        self.usage(["-backend", "etcd", "-session-ttl", "1500ms", "p"],
                   "-session-ttl for etcd must be a whole number of seconds, at least 1s")

    def test_state_dir_does_not_apply_to_a_server_backend(self):
        self.usage(["-state-dir", self.path("s"), "-backend", "etcd", "p"],
                   "-state-dir applies to the local backend, not to -backend etcd")

    # Go's flag package parses every occurrence, so a bad value is an error even when a later
    # occurrence of the same flag is good; lock currently looks only at the last one.
    # An empty value is a value like any other for Go's flag package: an unparsable one for a
    # number or duration; lock answers with its parser's own wording instead.
    def test_an_empty_number_or_duration_is_an_invalid_value(self):
        self.usage(["-n", "", "p"], 'invalid value "" for flag -n: parse error')
        self.usage(["-timeout=", "p"],
                   'invalid value "" for flag -timeout: time: invalid duration ""')

    def test_a_bad_value_is_rejected_even_if_the_flag_is_repeated(self):
        self.usage(["-n", "abc", "-n", "1", "p"], 'invalid value "abc" for flag -n: parse error')
        self.usage(["-timeout", "1", "-timeout", "1s", "p"],
                   'invalid value "1" for flag -timeout: time: missing unit in duration "1"')


class AcceptedSyntaxTest(LockTestCase):

    def ok(self, *args, **kwargs):
        r = self.run_lock(*args, **kwargs)
        self.assertEqual((r.returncode, r.stderr), (0, ""), f"lock {args}")
        return r.stdout

    def hold(self, *options, prefix="p"):
        """Starts a holder of `prefix` whose child runs until the file `go` exists; returns it once
        the child runs."""
        held, go = self.path(f"held-{len(self.procs)}"), self.path("go")
        holder = self.start_lock(*options, prefix,
                                 f"touch {held}; while [ ! -e {go} ]; do sleep 0.02; done")
        wait_for(lambda: os.path.exists(held) or holder.poll() is not None, what="the holder")
        self.assertIsNone(holder.poll(), holder.stderr.read() if holder.poll() is not None else "")
        return holder

    def release(self, holder):
        open(self.path("go"), "w").close()
        self.assertEqual(self.finish(holder)[0], 0)

    def assert_times_out(self, *args, at_least):
        marker = self.path("child-ran")
        start = time.monotonic()
        r = self.run_lock(*args, "p", "touch", marker)
        elapsed = time.monotonic() - start
        self.assertEqual(r.returncode, 1, f"lock {args}: {r.stderr}")
        self.assertTrue(r.stderr.startswith("lock: timed out waiting for prefix 'p'"), r.stderr)
        self.assertGreaterEqual(elapsed, at_least)
        self.assertFalse(os.path.exists(marker))

    def test_limit_with_equals_and_double_dash(self):
        # Both spellings say -n 2, so the second finds a free slot while the first holds one.
        holder = self.hold("-n=2")
        self.assertEqual(self.ok("--n", "2", "-timeout", "5s", "p", "echo", "second"), "second\n")
        self.assertEqual(self.ok("--n=2", "-timeout", "5s", "p", "echo", "third"), "third\n")
        self.release(holder)

    def test_shell_boolean_words(self):
        for word in TRUE_WORDS:
            with self.subTest(shell=word):
                self.assertEqual(self.ok(f"-shell={word}", "p", *SPACED), VIA_SHELL)
        for word in FALSE_WORDS:
            with self.subTest(shell=word):
                self.assertEqual(self.ok(f"-shell={word}", "p", *SPACED), DIRECT)
        self.assertEqual(self.ok("-shell", "p", *SPACED), VIA_SHELL)
        self.assertEqual(self.ok("--shell=false", "p", *SPACED), DIRECT)
        self.assertEqual(self.ok("p", *SPACED), VIA_SHELL)

    def test_boolean_flag_does_not_take_the_next_word(self):
        # "-shell false" is -shell followed by the prefix "false", as with Go's flag package.
        self.assertEqual(self.ok("-shell", "false", "printenv", "LOCK_PREFIX"), "false\n")

    def test_double_dash_ends_the_options(self):
        self.assertEqual(self.ok("-shell=false", "--", "-n", "printenv", "LOCK_PREFIX"), "-n\n")
        self.assertEqual(self.ok("--", "p", "echo", "hi"), "hi\n")

    def test_double_dash_after_the_prefix_separates_the_child(self):
        self.assertEqual(self.ok("-shell=false", "p", "--", "printf", "%s|", "--", "-n"),
                         "--|-n|")

    def test_everything_after_the_prefix_belongs_to_the_child(self):
        self.assertEqual(self.ok("-shell=false", "p", "printf", "%s|", "-n", "5", "-timeout", "x",
                                 "--", "-bogus"),
                         "-n|5|-timeout|x|--|-bogus|")
        self.assertEqual(self.ok("p", "echo", "x", "-n", "5"), "x -n 5\n")

    def test_try_is_the_timeout(self):
        holder = self.hold()
        self.assert_times_out("-try", "300ms", at_least=0.3)
        self.assert_times_out("-try=300ms", at_least=0.3)
        self.assert_times_out("-timeout", "300ms", at_least=0.3)
        self.release(holder)

    def test_repeated_flag_last_wins(self):
        holder = self.hold()
        # 0 would wait forever: only the last occurrence counts, whichever name it uses.
        self.assert_times_out("-timeout", "0", "-timeout", "200ms", at_least=0.2)
        self.assert_times_out("-timeout", "0", "-try", "200ms", at_least=0.2)
        self.assert_times_out("-try", "1h", "--timeout=200ms", at_least=0.2)
        self.release(holder)
        self.assertEqual(self.ok("-shell=false", "-shell", "p", *SPACED), VIA_SHELL)
        self.assertEqual(self.ok("-shell", "-shell=false", "p", *SPACED), DIRECT)
        self.assertEqual(self.ok("-n", "0", "-n", "1", "p", "echo", "ok"), "ok\n")
        record = self.ok("-name", "first", "-name", "second", "p", 'cat "$LOCK_KEY"')
        self.assertEqual(json.loads(record)["name"], "second")

    # Go's flag package takes an empty string as a value like any other; a script that passes
    # -name "$NAME" with NAME unset must still run, named by default.
    def test_empty_name_is_accepted(self):
        self.assertEqual(self.ok("-name", "", "p", "echo", "ok"), "ok\n")

    def test_go_durations(self):
        for text in ["300ms", "1.5h", "2h45m", "1us", "1µs".encode(), "1μs".encode(), "0", "0s",
                     ".5s", "+2s", "1h2m3.5s", "10ns"]:
            with self.subTest(timeout=text):
                self.assertEqual(self.ok("-timeout", text, "p", "echo", "ran"), "ran\n")
                self.assertEqual(self.ok("-kill-after", text, "p", "echo", "ran"), "ran\n")

    def test_help_prints_usage_on_stdout(self):
        marker = self.path("child-ran")
        for args in (["-help"], ["-h"], ["--help"], ["--h"], ["-n", "2", "-help", "p", "touch",
                                                                marker]):
            with self.subTest(args=args):
                r = self.run_lock(*args)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertIn("Usage: lock [options] prefix child...", r.stdout)
                for flag in FLAGS:
                    self.assertRegex(r.stdout, rf"(?<![\w-])-{re.escape(flag)}(?![\w-])",
                                     f"usage does not mention -{flag}")
                self.assertFalse(os.path.exists(marker))
        self.assertFalse(os.path.exists(self.state))

    def test_version(self):
        for args in (["-version"], ["--version"], ["-version", "p", "touch", self.path("ran")]):
            with self.subTest(args=args):
                r = self.run_lock(*args)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertRegex(r.stdout, r"^lock \S+\n$")
        self.assertFalse(os.path.exists(self.path("ran")))


if __name__ == "__main__":
    unittest.main()
