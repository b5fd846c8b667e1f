"""Contenders and their shared log.

Each contender runs `lock` over and over; the child `lock` runs is one critical section that
appends to one log file, with single O_APPEND writes so that lines from many processes never mix:

    start <token> <pid> <time> <tag> <helper pid> <lease> <spawned> <slot>
    end   <token> <pid> <time> <tag> <how>

token is $LOCK_FENCING_TOKEN; time is CLOCK_MONOTONIC (the clock of time.monotonic() here, and
of the Consul double's request log); tag names the contender; the helper is a grandchild (a
`sleep` the section waits for), so that "the child tree" is more than one process; lease is
$LOCK_SESSION (Consul) or $LOCK_KEY; spawned is when the harness started this run of `lock`
(so its acquisition came after it: the checker's token rule needs that bound); slot is
"<device>:<inode>" of the slot file whose lock the child inherited (local backend; "-" elsewhere),
which tells a hold in a state directory that was just removed from one in its successor; how is "done"
when the section ran its course and "stopped" when `lock` sent SIGTERM. A child killed outright
(SIGKILL) writes no end line: the LogWatcher notes the moment it finds the whole tree gone
instead.

With a register (register.py; the scenarios with n = 1), a section is also a read-modify-write:
after its start line it reads both registers, and once its length has passed it writes each value
read plus one, with its token, before its end line. So "done" means it wrote; a section stopped
(SIGTERM) or killed writes nothing more. Its write comes right after its wait, where a pause that
landed in the wait leaves it: a child not stopped by its lease deadline writes from a stale read.

The section is a small Perl program: it starts in milliseconds, where Python takes tens, which is
what lets a bench reach ten thousand sections in reasonable time.
"""

import math
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from harness import pid_alive as alive  # noqa: E402

SECTION = r"""
use strict;
use POSIX ();
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);
my ($log, $seconds, $tag, $spawned, $register) = @ARGV;
my $token = $ENV{LOCK_FENCING_TOKEN} // "-";
my $lease = $ENV{LOCK_SESSION} || $ENV{LOCK_KEY} || "-";
my $slot = "-";
if (!$ENV{LOCK_SESSION} && opendir(my $fds, "/proc/self/fd")) {
  for my $fd (readdir $fds) {
    my $to = readlink("/proc/self/fd/$fd") // next;
    next unless $to =~ m{/slot\.\d+(?: \(deleted\))?$};
    my @st = stat("/proc/self/fd/$fd");
    $slot = "$st[0]:$st[1]" if @st;
    last;
  }
}
open(my $fh, ">>", $log) or die "chaos section: $log: $!\n";
sub note { syswrite($fh, sprintf("%s %s %d %.6f %s\n", $_[0], $token, $$, clock_gettime(CLOCK_MONOTONIC), $_[1])) }
my $store;
sub ask {
  syswrite($store, "$_[0]\n") or die "chaos section: register: $!\n";
  my $answer = readline($store) // die "chaos section: register: no answer\n";
  return split(" ", $answer);
}
if ($register ne "-") {
  # Only here: Socket is the one module a section without a register does not load.
  require Socket;
  socket($store, Socket::PF_UNIX(), Socket::SOCK_STREAM(), 0)
    && connect($store, Socket::pack_sockaddr_un($register))
    or die "chaos section: register $register: $!\n";
}
my $helper = fork() // die "chaos section: fork: $!\n";
if ($helper == 0) { exec("sleep", $seconds) or POSIX::_exit(127) }
note("start", "$tag $helper $lease $spawned $slot");
# lock stops the whole group with SIGTERM: the helper gets it too; the section is over once both
# are gone, and writes nothing. One end line only: a SIGTERM after the helper's end (lock told to
# stop just then) changes nothing.
$SIG{TERM} = sub { $SIG{TERM} = "IGNORE"; waitpid($helper, 0); note("end", "$tag stopped"); exit 0 };
my @read = $register ne "-" ? ask("R $token $$") : ();
waitpid($helper, 0);
$SIG{TERM} = "IGNORE";
ask("W $token $$ " . ($read[0] + 1) . " " . ($read[1] + 1)) if @read;
note("end", "$tag done");
"""

PERL = "/usr/bin/perl"


def section_seconds(rng, shortest=0.002, longest=0.1):
    """Log-uniform between shortest and longest: mostly short sections, some long ones."""
    return math.exp(rng.uniform(math.log(shortest), math.log(longest)))


def tree(pid):
    """"pid:state:name" of a process and its descendants, for reports."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/stat") as f:
                stat = f.read()
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            out.append(f"{p}:{stat.rsplit(')', 1)[1].split()[0]}:{name}")
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return " ".join(out) or "gone"


class Section:
    """One critical section. A child killed outright writes no end line: its end is then when the
    watcher found its tree gone, and `alive_at` the last time it found it still there, so that it
    died somewhere in between."""
    __slots__ = ("token", "pid", "start", "tag", "helper", "lease", "spawned", "slot", "end",
                 "how", "alive_at")

    def __init__(self, token, pid, start, tag, helper=0, lease="-", spawned=None, slot="-",
                 end=None, how=None, alive_at=None):
        self.token, self.pid, self.start, self.tag = token, pid, start, tag
        self.helper, self.lease, self.slot = helper, lease, slot
        self.spawned = start if spawned is None else spawned
        self.end, self.how = end, how
        self.alive_at = alive_at

    def __repr__(self):
        return (f"Section({self.tag} pid {self.pid} token {self.token} "
                f"{self.start:.3f}..{self.end if self.end is None else round(self.end, 3)} "
                f"{self.how})")


def parse_line(line):
    """("start", Section), ("end", (pid, time, how)), or (None, None) for a malformed line."""
    f = line.split()
    try:
        if f and f[0] == "start" and len(f) == 9:
            token = int(f[1]) if f[1] != "-" else None
            return "start", Section(token, int(f[2]), float(f[3]), f[4], int(f[5]), f[6],
                                    float(f[7]), f[8])
        if f and f[0] == "end" and len(f) == 6:
            return "end", (int(f[2]), float(f[3]), f[5])
    except ValueError:
        pass
    return None, None


def read_log(text):
    """Every section of a finished log, in order of their start lines (end None where no end
    line came); and the malformed lines."""
    sections, open_, malformed = [], {}, []
    for line in text.splitlines():
        kind, value = parse_line(line)
        if kind == "start":
            sections.append(value)
            open_[value.pid] = value
        elif kind == "end" and value[0] in open_:
            s = open_.pop(value[0])
            s.end, s.how = value[1], value[2]
        else:
            malformed.append(line)
    return sections, malformed


class LogWatcher(threading.Thread):
    """Follows the log as it grows; keeps every section, and for a section whose tree is gone
    without an end line (SIGKILL) records when it found it gone and when it last found it there:
    bounds of the death, one poll (10 ms, or longer on a busy machine) apart."""

    POLL = 0.01

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        open(path, "a").close()
        self._file = open(path)
        self._partial = ""
        # Reentrant: wait() calls its predicate under the lock, and predicates use open_sections().
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._halt = threading.Event()  # not _stop: Thread has a method of that name
        self.sections = []
        self._open = {}  # pid -> Section without an end
        self.malformed = []

    def run(self):
        while not self._halt.wait(self.POLL):
            self.poll()

    def stop(self):
        self._halt.set()
        self.join(5)
        self.poll()
        self._file.close()

    def poll(self):
        self._read()
        looked = time.monotonic()  # every tree found alive below was alive at this instant
        gone = []
        for s in list(self._open.values()):
            if not alive(s.pid) and not alive(s.helper):
                gone.append(s)
            else:
                s.alive_at = looked
        if gone:
            now = time.monotonic()
            self._read()  # an end line written just before the exit is better than our guess
            with self._changed:
                for s in gone:
                    if s.end is None:
                        s.end, s.how = now, "killed"
                        self._open.pop(s.pid, None)
                self._changed.notify_all()

    def _read(self):
        chunk = self._file.read()
        if not chunk:
            return
        text = self._partial + chunk
        lines = text.split("\n")
        self._partial = lines.pop()
        with self._changed:
            for line in lines:
                self._take(line)
            self._changed.notify_all()

    def _take(self, line):
        kind, value = parse_line(line)
        if kind == "start":
            self.sections.append(value)
            self._open[value.pid] = value
            return
        if kind == "end":
            pid, end, how = value
            s = self._open.pop(pid, None)
            if s is not None:
                s.end, s.how = end, how
                return
        self.malformed.append(line)

    def wait(self, predicate, timeout):
        """Waits until predicate(sections) is truthy; returns its value, or None at the timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                value = predicate(self.sections)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(min(left, 0.1))

    def section_of(self, tag, after=0.0):
        """The first section of `tag` that started after `after`, if any."""
        with self._lock:
            for s in self.sections:
                if s.tag == tag and s.start >= after:
                    return s
        return None

    def open_sections(self):
        with self._lock:
            return list(self._open.values())


class Contenders:
    """M contenders looping on one prefix: each runs `lock <flags> <prefix> <section>` again as
    soon as the previous run ended, after a short random pause (`think`, which keeps the CPU load
    of the suite low; 0 in the bench). Failed runs are kept for the report. spawn() also starts
    one-off runs (the victims) with flags of their own; stop() ends all of them. With `register`
    (a RegisterStore's socket), every section also does its read-modify-write there."""

    def __init__(self, lock_bin, flags, prefix, log, env, count, seed, think=0.0, register=None):
        self.lock_bin, self.flags, self.prefix, self.log, self.env = lock_bin, flags, prefix, log, env
        self.register = register  # the register store's socket, or None
        self.count, self.think = count, think
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.go = threading.Event()  # cleared while the contenders hold off (see hold_off())
        self.go.set()
        self.threads = []
        self.running = {}  # tag -> Popen
        self.since = {}    # tag -> when its current run was spawned
        self.runs = 0
        self.failures = []  # (tag, exit status, stderr)
        self._lock = threading.Lock()

    def command(self, seconds, tag, flags=None, spawned=0.0):
        """flags replaces the contenders' own (a victim goes through the proxy)."""
        return [self.lock_bin, *(self.flags if flags is None else flags), self.prefix, PERL, "-e",
                SECTION, self.log, f"{seconds:.4f}", tag, f"{spawned:.6f}", self.register or "-"]

    def start(self):
        for i in range(self.count):
            t = threading.Thread(target=self._loop, args=(f"c{i}", self.rng.random()), daemon=True)
            t.start()
            self.threads.append(t)

    def _loop(self, tag, seed):
        rng = random.Random(seed)
        while not self.stopping.is_set():
            self.go.wait()
            try:
                proc = self.spawn(section_seconds(rng), tag)
            except OSError as e:  # fork failed (a loaded machine): a failed run, not a dead loop
                with self._lock:
                    self.failures.append((tag, None, f"could not start lock: {e}"))
                self.stopping.wait(0.1)
                continue
            if proc is None:
                return
            _, err = proc.communicate()
            with self._lock:
                self.runs += 1
                self.running.pop(tag, None)
                if proc.returncode != 0 and not self.stopping.is_set():
                    self.failures.append((tag, proc.returncode, err.strip()))
            # A failed run (a server answering 503) must not turn into a tight loop of retries.
            pause = self.think * rng.random() + (0.05 if proc.returncode else 0.0)
            if pause:
                self.stopping.wait(pause)

    def spawn(self, seconds, tag, flags=None, env=None):
        """Starts one run of lock; None once stopping."""
        with self._lock:
            if self.stopping.is_set():
                return None
            spawned = time.monotonic()  # before the fork: lock cannot have acquired earlier
            proc = subprocess.Popen(self.command(seconds, tag, flags, spawned), env=env or self.env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            self.running[tag] = proc
            self.since[tag] = spawned
        return proc

    def snapshot(self):
        """What each run still going is doing, for a report of a hang: tag, lock's pid, for how
        long, and its process tree's states."""
        now = time.monotonic()
        with self._lock:
            procs = [(tag, p, self.since.get(tag, now)) for tag, p in self.running.items()
                     if p.returncode is None]
        threads = sum(t.is_alive() for t in self.threads)
        return (f"{threads} of {len(self.threads)} contender threads alive; running: " +
                "; ".join(f"{tag} lock {p.pid} for {now - since:.1f}s ({tree(p.pid)})"
                          for tag, p, since in procs))

    def hold_off(self):
        """No new runs until resume(); those already waiting go on. Makes room for a victim on
        a backend that does not serve waiters in order (Consul), so that it cannot starve."""
        self.go.clear()

    def resume(self):
        self.go.set()

    def forget(self, tag):
        """A victim the scenario has reaped itself (with wait4): stop() must not signal its pid,
        which may belong to another process by then."""
        with self._lock:
            self.running.pop(tag, None)

    def stop(self, timeout=15.0):
        """SIGTERM to every lock still running (a waiter gives up, a holder stops its child);
        returns the tags of those that did not exit within `timeout`: hangs, killed here."""
        with self._lock:
            self.stopping.set()  # under the lock: no spawn() can start a run we would miss
            procs = dict(self.running)
        self.go.set()
        for proc in procs.values():
            # send_signal() skips a process already reaped (by its loop's communicate(), which
            # may come at any moment), so the signal never reaches a reused pid.
            proc.send_signal(signal.SIGCONT)  # a paused one cannot act on SIGTERM
            proc.send_signal(signal.SIGTERM)
        hung = []
        deadline = time.monotonic() + timeout
        for tag, proc in procs.items():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                hung.append(tag)
                proc.kill()
                proc.wait()
        for t in self.threads:
            t.join(timeout)
        return hung
