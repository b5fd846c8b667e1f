"""The documentation that ships with lock: the man page renders without warnings and documents
exactly the flags `lock -help` lists, and each shell's completion file loads in that shell and
completes lock's flags, their values and the child command."""

import os
import re
import shutil
import subprocess
import unittest

from harness import LockTestCase

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MAN_PAGE = os.path.join(ROOT, "man", "lock.1")
COMPLETIONS = os.path.join(ROOT, "completions")

# Documented in the man page but not listed by -help: -h and -help are Go's own, -try is an
# alias of -timeout (which -help mentions in the text of -timeout).
ONLY_IN_MAN = {"h", "help", "try"}

# What each completion must offer: (command line up to the cursor, one expected candidate).
CASES = [
    ("lock -ti", "-timeout"),              # a flag, in Go's single-dash style
    ("lock -backend ", "zookeeper"),       # a flag's value
    ("lock -timeout=", "30s"),             # a value in the same word
    ("lock -n 2 p ech", "echo"),           # after the prefix: the child command
]


def help_flags(text):
    """The flags of `lock -help`: the lines that start with -flag, then the description."""
    return set(re.findall(r"^  -([a-z][a-z-]*)(?:=<\w+>)?\s{2,}\S", text, re.M))


def man_option_flags(source):
    """The flags tagged in the man page's OPTIONS section (.TP or .TQ, then the tag line)."""
    section = re.search(r"^\.SH OPTIONS\n(.*?)^\.SH ", source, re.M | re.S)
    if not section:
        raise AssertionError("the man page has no OPTIONS section")
    lines = section.group(1).splitlines()
    flags = set()
    for previous, line in zip(lines, lines[1:]):
        if previous in (".TP", ".TQ"):
            tag = line.replace("\\-", "-")
            flags |= set(re.findall(r"(?<![\w-])-([a-z][a-z-]*)", tag))
    return flags


class ManPageTest(LockTestCase):

    def read_man_page(self):
        with open(MAN_PAGE) as f:
            return f.read()

    def test_renders_without_warnings(self):
        self.assertTrue(shutil.which("groff"), "groff is not installed (scripts/install-deps.sh)")
        r = subprocess.run(["groff", "-man", "-ww", "-z", MAN_PAGE], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "", ""))

    def test_documents_exactly_the_flags_of_help(self):
        r = self.run_lock("-help")
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = help_flags(r.stdout)
        self.assertIn("timeout", listed, "cannot read the flags of lock -help")
        self.assertFalse(listed & ONLY_IN_MAN)
        documented = man_option_flags(self.read_man_page())
        self.assertEqual(documented - ONLY_IN_MAN, listed,
                         f"only in the man page: {sorted(documented - ONLY_IN_MAN - listed)}; "
                         f"only in -help: {sorted(listed - documented)}")
        self.assertLessEqual(ONLY_IN_MAN, documented)


# Runs zsh's real completion system on a line, in an interactive zsh on a pseudo-terminal (zpty),
# and prints every candidate offered: compadd is wrapped to record what matches the word.
ZSH_DRIVER = r"""
zmodload zsh/zpty || exit 3
rm -f $ZDOTDIR/offered $ZDOTDIR/done
cat > $ZDOTDIR/.zshrc <<'EOF'
PS1='% '
fpath=($LOCK_COMPLETIONS $fpath)
autoload -Uz compinit && compinit -u -d $ZDOTDIR/.zcompdump
compadd() {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return; fi
  local -a __offered
  builtin compadd -O __offered "$@"
  (( $#__offered )) && print -rl -- $__offered >> $ZDOTDIR/offered
  builtin compadd "$@"
}
_lock_test_done() { : > $ZDOTDIR/done }
comppostfuncs=(_lock_test_done)
print -r -- READY
EOF
zpty lock_test zsh -d -i
zpty -r lock_test _ '*READY*' || exit 4
zpty -w -n lock_test "$1"$'\t'
repeat 300; do [[ -e $ZDOTDIR/done ]] && break; sleep 0.1; done
zpty -d lock_test
[[ -e $ZDOTDIR/done ]] || { print -u2 'no completion ran'; exit 5 }
[[ ! -e $ZDOTDIR/offered ]] || cat $ZDOTDIR/offered
"""

BASH_DRIVER = r"""
source "$1" || exit 3
spec=$(complete -p lock) || exit 4
function=${spec#*-F }
function=${function%% *}
COMP_WORDS=("${@:2}")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="${*:2}"
COMP_POINT=${#COMP_LINE}
"$function" 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"
"""


class CompletionTest(LockTestCase):
    """Each completion file, loaded in its own shell, offers what CASES expects."""

    def shell_env(self):
        home = self.path("home")
        os.makedirs(home, exist_ok=True)
        env = dict(self.env, HOME=home, ZDOTDIR=home, LOCK_COMPLETIONS=COMPLETIONS,
                   XDG_CONFIG_HOME=os.path.join(home, ".config"),
                   XDG_DATA_HOME=os.path.join(home, ".local", "share"),
                   XDG_CACHE_HOME=os.path.join(home, ".cache"))
        return env

    def offered(self, complete, line):
        r = complete(line)
        self.assertEqual(r.returncode, 0, r.stderr)
        # fish offers "-timeout=30s" where the others offer "30s"; a tab starts fish's
        # description.
        return [c.split("\t")[0].rpartition("=")[2] for c in r.stdout.splitlines()]

    def check(self, shell, complete):
        """complete(line) runs the shell and returns its CompletedProcess; one candidate a line."""
        if not shutil.which(shell):
            self.skipTest(f"{shell} is not installed")
        for line, expected in CASES:
            with self.subTest(shell=shell, line=line):
                offered = self.offered(complete, line)
                self.assertIn(expected, offered)
                if line == "lock -ti":
                    self.assertNotIn("-tls-server-name", offered)
        # Checked against what lock itself says: every flag of -help, every backend it knows.
        with self.subTest(shell=shell, line="lock -"):
            flags = help_flags(self.run_lock("-help").stdout)
            missing = {f for f in flags if "-" + f not in self.offered(complete, "lock -")}
            self.assertEqual(missing, set(), "flags of -help the completion does not offer")
        with self.subTest(shell=shell, line="lock -backend "):
            said = self.run_lock("-backend", "?", "p", "true").stderr
            names = re.search(r"\(choose ([^)]*)\)", said).group(1).replace(" or ", ", ").split(", ")
            self.assertEqual(sorted(self.offered(complete, "lock -backend ")), sorted(names))

    def run_shell(self, argv):
        return subprocess.run(argv, env=self.shell_env(), cwd=self.tmp, capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)

    def test_bash(self):
        script = os.path.join(COMPLETIONS, "lock.bash")

        def complete(line):
            # The words as bash makes them: "=" is a word of its own.
            words = re.findall(r"=|[^ =]+", line) + ([""] if line.endswith(" ") else [])
            return self.run_shell(["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "bash",
                                   script, *words])
        self.check("bash", complete)

    def test_zsh(self):
        self.check("zsh", lambda line: self.run_shell(["zsh", "-f", "-c", ZSH_DRIVER, "zsh", line]))

    def test_fish(self):
        script = os.path.join(COMPLETIONS, "lock.fish")
        self.check("fish", lambda line: self.run_shell(
            ["fish", "--no-config", "-c", "source $argv[1]; and complete -C $argv[2]",
             script, line]))


if __name__ == "__main__":
    unittest.main()
