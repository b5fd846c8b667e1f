"""Judges one scenario's sections from the log alone (plus what the harness knows of the fault):
mutual exclusion, fencing-token order, children that outlived their lease, and updates lost from
the register the sections share (n = 1); prints the table.

Mutual exclusion: at no instant more than n children between their start and end lines. The
allowed exceptions are a section whose whole client the harness paused (SIGSTOP of `lock`, its
watchdog and the child together) beyond its TTL (a paused machine cannot stop anything, so the
server rightly hands its slot on while its child still runs; a `lock` paused alone, or with its
child, excuses nothing, since its watchdog keeps the deadline), and a local holder whose state directory
the harness removed, or a ZooKeeper holder whose node it deleted, until `lock` notices. There the
newcomer's fencing token must be higher than the old holder's, which is all a lease can promise
(see SAFETY in man/lock.1).

Fencing tokens ("a number that rises on every acquisition of the prefix"). Two rules, both sound
for every backend and limit:

  * A.start < B.spawned => token(A) < token(B). A's acquisition came before its child started;
    B's came after the harness started B's `lock`. So A acquired first, and every backend's token
    grows with acquisition order: the local counter, etcd's create revision (a later key, or a key
    that was behind A in the queue), Consul's LockIndex (-n 1) and the ModifyIndex of `.lock` read
    after B's check-and-set, which comes after A's read (-n N), ZooKeeper's czxid of the node
    (created after B's lock started, A's before A's child did).
  * n = 1: tokens rise strictly in the order sections start (holds never overlap, so start order
    is acquisition order; a paused holder's successor acquired after it too).
  For n > 1 the start order alone proves nothing: two holders that acquire together may log their
  starts either way round.

Lease deadline (server backends): the earliest moment the server could have expired the victim's
lease, as the harness observed it (scenarios.py: the Consul double's request log, etcd's
TimeToLive answers, the requests the fault proxy handed ZooKeeper), a lower bound of the true
expiry. A "stop" victim's child must end before it (`lock` aims a tenth of the TTL earlier);
overrun = end - deadline when positive. "closest" is the largest end - deadline seen: negative is
the margin that was left.

Expectations per victim: "survive" (the child ran its course: how == "done"), "stop" (it did not,
and ended before the deadline), None (safety alone). A contender's child (not a victim) stopped before the harness began its final
stop is a false loss, unless the fault hit the whole server (losses_allowed). What a victim's
`lock` said, where the fault says what it must say, is a kind of failure of its own ("messages"),
so that a known wrong message can be expected without hiding any other problem.

Lost updates (register.py): each section reads the register, waits, and writes what it read plus
one, so a history in which every read-modify-write saw the one before it ends with the register
equal to the number of writes it acknowledged. Lost updates = acknowledged writes - final value:
the increments the final value does not show, which is what Jepsen's counter checker holds a
final read against, and its lock-set checker counts for a set (acknowledged adds missing from the
final read). A write the register refused (a token below the highest it had seen) was never
acknowledged, so it loses nothing: refusing it is the fencing token's work. Each acknowledged
write erased before + 1 - value updates (those written since its read; negative when it restores
some, as a write from a read taken before a stale write does); these sum to the same count, and
the write that erased most is the example. So one stale write that erased 30 updates, followed
by a successor's write from a read taken before it, loses 1 in all: the stale writer's own
increment, as a set that drops an element would. The checked register must lose none,
whatever the fault: the token must protect. The unchecked one may lose updates only where an
overlap is allowed (a holder excused above); anywhere else a loss fails the row. A section that
ran its course ("done") must have written: the record must show its write.
"""

import math
from dataclasses import dataclass, field

KINDS = ("overlaps", "stale_tokens", "overruns", "lost_updates", "messages", "problems")


@dataclass
class RegisterWrite:
    """One write asked of a register, as its store took it (register.py)."""
    pid: int
    token: int | None
    read: int | None   # what this section read from the register
    before: int        # the register's value when the write came
    value: int         # the value written (read + 1)
    accepted: bool     # acknowledged; False: refused for a stale token
    at: float = 0.0    # monotonic time of its arrival

    @property
    def erased(self):
        """Updates this write undid: those acknowledged between its read and itself."""
        return self.before + 1 - self.value if self.accepted else 0


@dataclass
class RegisterLog:
    """A register's final value and every write asked of it, in the order taken."""
    name: str
    final: int
    writes: list

    @property
    def acknowledged(self):
        return sum(w.accepted for w in self.writes)

    @property
    def lost(self):
        """Acknowledged increments the final value does not show (see the module's doc)."""
        return self.acknowledged - self.final

    @property
    def refused(self):
        return sum(not w.accepted for w in self.writes)


@dataclass
class Row:
    backend: str
    fault: str
    n: int
    sections: int = 0
    overlaps: int = 0          # starts that made more than n holders, outside the allowed case
    unresolved: int = 0        # starts the log cannot place before or after a killed child's death
    allowed_overlaps: int = 0  # the same, involving a holder whose overlap is excused
    stale_tokens: int = 0      # pairs or starts breaking a token rule (counted once per newcomer)
    overruns: int = 0          # victims that ended after their lease deadline
    lost_checked: int | None = None    # updates lost from the register that checks tokens
    lost_unchecked: int | None = None  # ... and from the one that does not (None: no register)
    losses_allowed: bool = False  # an overlap was allowed: the unchecked register may lose some
    refused: int = 0           # writes the checked register refused for a stale token
    worst_overrun: float = 0.0  # seconds, max(0, end - deadline)
    closest: float | None = None  # seconds, max(end - deadline) where a deadline was known
    messages: list = field(default_factory=list)  # a victim's lock said other than it should
    problems: list = field(default_factory=list)  # what else the scenario found wrong
    notes: list = field(default_factory=list)
    examples: list = field(default_factory=list)  # a few offending log excerpts, for the report
    expected: tuple | None = None  # (kind or kinds, why): a known failure of lock, reported
    seconds: float = 0.0

    @property
    def lost_updates(self):
        """The lost updates that fail the row: every one of the checked register's, and the
        unchecked register's where no overlap was allowed."""
        return (self.lost_checked or 0) + (0 if self.losses_allowed else self.lost_unchecked or 0)

    def kinds(self):
        """The kinds of failure found (see KINDS)."""
        return {k for k in KINDS if getattr(self, k)}

    def expected_kinds(self):
        """The kinds of failure known for this row: one, or a tuple of them (one fault of lock
        that shows in more than one way)."""
        if not self.expected:
            return set()
        kind = self.expected[0]
        return set(kind) if isinstance(kind, tuple) else {kind}

    @property
    def verdict(self):
        found = self.kinds()
        if self.expected:
            known = self.expected_kinds()
            if found - known:
                return "FAIL"
            return "xfail" if found & known else "XPASS"
        return "FAIL" if found else "ok"

    @property
    def failed(self):
        """What fails a run: an unexpected failure (an expected one, or XPASS, does not)."""
        return self.verdict == "FAIL"

    def example(self, text):
        if len(self.examples) < 3:
            self.examples.append(text)


def _fmt(s):
    end = "-" if s.end is None else f"{s.end:.3f}"
    return (f"{s.tag} pid {s.pid} token {s.token} spawned {s.spawned:.3f} "
            f"start {s.start:.3f} end {end} ({s.how})")


def check(row, sections, deadlines=None, allowed=(), expect=None, ending_at=math.inf,
          losses_allowed=False, registers=None):
    """Fills row from the sections (contenders.Section) and returns it.

    deadlines: {pid: lease deadline}; allowed: pids of children whose overlap is excused (their
    whole client paused beyond the TTL, their state directory or node removed); expect: {pid:
    "survive", "stop" or None} for every victim; ending_at: when the harness began stopping every
    lock (a child stopped after it was asked to stop); losses_allowed: the fault hit the server,
    so any holder may lose; registers: {"checked"/"unchecked": RegisterLog} when the sections
    shared a register."""
    deadlines, expect = deadlines or {}, expect or {}
    row.sections = len(sections)
    for s in sections:
        if s.end is None:
            row.problems.append(f"child {s.pid} ({s.tag}) never ended")
    done = sorted((s for s in sections if s.end is not None), key=lambda s: s.start)
    _exclusion(row, done, allowed, deadlines)
    _tokens(row, sorted(sections, key=lambda s: s.start))
    _deadlines(row, done, deadlines, allowed, expect)
    if registers:
        _registers(row, sections, registers, bool(allowed))
    for s in done:
        if (s.pid not in expect and s.how != "done" and s.end < ending_at
                and s.pid not in allowed and not losses_allowed):
            row.problems.append(f"false loss: a contender's child was {s.how} with no fault on "
                                f"its lock: {_fmt(s)}")
    return row


def _exclusion(row, done, allowed, deadlines):
    active = []
    for s in done:
        active = [o for o in active if o.end > s.start]
        # A child killed outright died between the last poll that found it and the first that
        # did not: a start in between is no proof of an overlap, nor of its absence.
        dying = [o for o in active if o.how == "killed" and o.alive_at is not None
                 and o.alive_at <= s.start]
        if dying and len(active) >= row.n and len(active) - len(dying) < row.n:
            row.unresolved += 1
            active.append(s)
            continue
        if len(active) >= row.n:
            # A paused holder excuses only a start after its lease could have expired, and
            # only its own slot: the others must still fit within n.
            paused = [o for o in active if o.pid in allowed
                      and s.start >= deadlines.get(o.pid, -math.inf)]
            if len(active) - len(paused) < row.n:
                row.allowed_overlaps += 1
                # The newcomer took the paused holder's slot: its token must be higher.
                stale = [o for o in paused if s.token is None or o.token is None
                         or s.token <= o.token]
                if stale:
                    row.stale_tokens += 1
                    row.example(f"token not above the paused holder's: {_fmt(s)} while "
                                f"{_fmt(stale[0])}")
            else:
                row.overlaps += 1
                row.example(f"{len(active) + 1} holders at {s.start:.3f} with n={row.n}: "
                            + "; ".join(_fmt(o) for o in active + [s]))
        active.append(s)


def _tokens(row, by_start):
    stale = set()
    missing = [s for s in by_start if s.token is None]
    for s in missing:
        row.example(f"no fencing token: {_fmt(s)}")
    stale.update(s.pid for s in missing)
    tokened = [s for s in by_start if s.token is not None]
    # Rule 1: against every section that started before this one's lock was spawned.
    starts = iter(tokened)
    best = None  # the section with the highest token among those started so far
    pending = next(starts, None)
    for s in sorted(tokened, key=lambda s: s.spawned):
        while pending is not None and pending.start < s.spawned:
            if best is None or pending.token > best.token:
                best = pending
            pending = next(starts, None)
        if best is not None and s.token <= best.token and s.pid not in stale:
            stale.add(s.pid)
            row.example(f"token not above one acquired before this lock started: {_fmt(s)} "
                        f"after {_fmt(best)}")
    # Rule 2: with one holder at a time, tokens rise with every start.
    if row.n == 1:
        for a, b in zip(tokened, tokened[1:]):
            if b.token <= a.token and b.pid not in stale:
                stale.add(b.pid)
                row.example(f"token did not rise from one section to the next: {_fmt(a)} then "
                            f"{_fmt(b)}")
    row.stale_tokens += len(stale)


def _deadlines(row, done, deadlines, allowed, expect):
    closest = -math.inf
    for s in done:
        deadline = deadlines.get(s.pid)
        if deadline is not None:
            closest = max(closest, s.end - deadline)
            if s.end > deadline and s.pid not in allowed:
                row.overruns += 1
                row.worst_overrun = max(row.worst_overrun, s.end - deadline)
                row.example(f"child outlived its lease deadline {deadline:.3f} by "
                            f"{s.end - deadline:.3f}s: {_fmt(s)}")
        want = expect.get(s.pid)
        if want == "survive" and s.how != "done":
            row.problems.append(f"the victim's child was {s.how} though the fault should be "
                                f"ridden out: {_fmt(s)}")
        elif want == "stop":
            if s.how == "done":
                row.problems.append(f"the victim's child ran its course: lock never noticed the "
                                    f"loss: {_fmt(s)}")
            elif deadline is None:
                row.problems.append(f"no lease deadline known for the victim: {_fmt(s)}")
    if closest > -math.inf:
        row.closest = closest


def _registers(row, sections, registers, overlap_allowed):
    checked, unchecked = registers["checked"], registers["unchecked"]
    row.lost_checked, row.lost_unchecked = checked.lost, unchecked.lost
    row.losses_allowed = overlap_allowed
    row.refused = checked.refused
    by_pid = {s.pid: s for s in sections}
    for log in (checked, unchecked):
        worst = max((w for w in log.writes if w.erased > 0), key=lambda w: w.erased, default=None)
        if worst is None:
            continue
        who = by_pid.get(worst.pid)
        text = (f"{log.name} register: {who.tag if who else '?'} pid {worst.pid} token "
                f"{worst.token} read {worst.read} and wrote {worst.value} over {worst.before}, "
                f"erasing the {worst.erased} update(s) acknowledged since its read")
        if log is checked or not overlap_allowed:
            # Kept among the few examples even after many overlaps: it shows what they cost.
            if len(row.examples) >= 3:
                row.examples.pop()
            row.example(text)
        else:  # what the fault was there to show
            row.notes.append(f"e.g. {text}")
    for log in (checked, unchecked):
        odd = [w for w in log.writes if w.read is None or w.value != w.read + 1]
        if odd:
            row.problems.append(f"{log.name} register: {len(odd)} write(s) not one above what "
                                f"the writer read, e.g. {odd[0]}")
    wrote = {w.pid for w in unchecked.writes}
    for s in sections:
        if s.how == "done" and s.pid not in wrote:
            row.problems.append(f"a section ran its course without writing the register: {_fmt(s)}")
    strangers = wrote - set(by_pid)
    if strangers:
        row.problems.append(f"register writes from pids that logged no section: "
                            f"{sorted(strangers)}")


def _count(value):
    return "-" if value is None else str(value)


def table(rows):
    """The report: one line per scenario, then the details, then a total line per backend."""
    head = ("backend", "fault", "n", "sections", "overlaps", "stale", "lost checked",
            "lost unchecked", "closest ms", "secs", "verdict", "notes")
    lines = [head]
    for r in rows:
        notes = []
        if r.allowed_overlaps:
            notes.append(f"{r.allowed_overlaps} allowed overlap(s), paused or path lost")
        if r.unresolved:
            notes.append(f"{r.unresolved} start(s) within a killed child's last poll")
        if r.overruns:
            notes.append(f"overrun {r.worst_overrun * 1000:.0f} ms")
        if r.lost_unchecked and r.losses_allowed:
            notes.append("unchecked losses allowed")
        if r.refused:
            notes.append(f"{r.refused} stale write(s) refused")
        if r.expected and r.verdict != "ok":
            notes.append(f"expected: {', '.join(sorted(r.expected_kinds()))}")
        if r.messages:
            notes.append(f"{len(r.messages)} wrong message(s)")
        if r.problems:
            notes.append(f"{len(r.problems)} problem(s)")
        lines.append((r.backend, r.fault, str(r.n), str(r.sections), str(r.overlaps),
                      str(r.stale_tokens), _count(r.lost_checked), _count(r.lost_unchecked),
                      "-" if r.closest is None else f"{r.closest * 1000:.0f}",
                      f"{r.seconds:.0f}", r.verdict, "; ".join(notes)))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    for r in rows:
        where = f"  {r.backend} / {r.fault} / n={r.n}"
        for text in r.messages + r.problems:
            out.append(f"{where}: {text}")
        if r.verdict in ("FAIL", "xfail"):
            for text in r.examples[:3 if r.verdict == "FAIL" else 1]:
                out.append(f"{where}: e.g. {text}")
        if r.expected and r.verdict != "ok":
            out.append(f"{where}: known: {r.expected[1]}")
        for text in r.notes:
            out.append(f"{where}: note: {text}")
    out.append("")
    out.extend(totals(rows))
    out.append("closest: the latest a victim's child ended relative to its lease deadline as "
               "the server saw it (negative = before); stale: sections breaking a fencing-token "
               "rule; lost checked / unchecked: acknowledged increments missing from the final "
               "value of the register that refuses writes with a token below the highest it has "
               "seen / of the one that takes every write (- where n > 1); see "
               "tests/chaos/checker.py.")
    return "\n".join(out)


def totals(rows):
    """One line per backend."""
    out = []
    for backend in dict.fromkeys(r.backend for r in rows):
        mine = [r for r in rows if r.backend == backend]
        verdicts = [r.verdict for r in mine]
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in ("ok", "FAIL", "xfail", "XPASS")
                           if v in verdicts)
        out.append(f"total {backend}: {len(mine)} scenarios, "
                   f"{sum(r.sections for r in mine)} sections, "
                   f"{sum(r.overlaps for r in mine)} overlaps "
                   f"(+{sum(r.allowed_overlaps for r in mine)} allowed, "
                   f"{sum(r.unresolved for r in mine)} unresolved), "
                   f"{sum(r.stale_tokens for r in mine)} stale tokens, "
                   f"{sum(r.overruns for r in mine)} overruns, "
                   f"lost updates {sum(r.lost_checked or 0 for r in mine)} checked, "
                   f"{sum(r.lost_unchecked or 0 for r in mine)} unchecked "
                   f"({sum(r.lost_unchecked or 0 for r in mine if r.losses_allowed)} allowed), "
                   f"{sum(len(r.messages) for r in mine)} wrong messages, "
                   f"{sum(len(r.problems) for r in mine)} problems, "
                   f"{sum(r.seconds for r in mine):.0f} s: {counts}")
    return out
