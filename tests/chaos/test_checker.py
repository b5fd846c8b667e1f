"""The checker can fail: synthetic logs, in the very format the sections write, with an overlap,
a token going backwards, a child outliving its lease, a false loss, updates lost from the
register (histories replayed through register.Registers, the store's own logic), and clean ones."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checker import Row, check, table  # noqa: E402
from contenders import Section, read_log  # noqa: E402
from register import Registers  # noqa: E402


def log(*events):
    """Log lines from (kind, tag, pid, token, time[, spawned or how]) tuples: start lines get
    spawned (default: 0.05 s before the start), end lines get how (default "done")."""
    lines = []
    for kind, tag, pid, token, at, *extra in events:
        if kind == "start":
            spawned = extra[0] if extra else at - 0.05
            lines.append(f"start {token} {pid} {at:.6f} {tag} {pid + 1000} lease-{pid} "
                         f"{spawned:.6f} -")
        else:
            lines.append(f"end {token} {pid} {at:.6f} {tag} {extra[0] if extra else 'done'}")
    return "\n".join(lines) + "\n"


def history(*ops):
    """The registers after ops: ("R", pid, token) reads both, ("W", pid, token) writes what that
    pid read plus one, as a section does."""
    registers, read = Registers(), {}
    for op, pid, token in ops:
        if op == "R":
            read[pid] = [int(v) for v in registers.request(f"R {token} {pid}").split()]
        else:
            registers.request(f"W {token} {pid} {read[pid][0] + 1} {read[pid][1] + 1}")
    return registers.logs()


def judge(text, n=1, **kw):
    sections, malformed = read_log(text)
    assert not malformed, malformed
    return check(Row("test", "synthetic", n), sections, **kw)


# Three sections one after another, tokens rising: the clean case.
CLEAN = log(("start", "c0", 100, 5, 1.0), ("end", "c0", 100, 5, 1.1),
            ("start", "c1", 101, 6, 1.2), ("end", "c1", 101, 6, 1.3),
            ("start", "c0", 102, 9, 1.4), ("end", "c0", 102, 9, 1.5))


class CheckerTest(unittest.TestCase):
    def test_clean_log_passes(self):
        row = judge(CLEAN)
        self.assertEqual((row.sections, row.overlaps, row.stale_tokens, row.overruns,
                          row.problems, row.verdict), (3, 0, 0, 0, [], "ok"))

    def test_two_holders_of_a_lock_is_an_overlap(self):
        row = judge(log(("start", "c0", 100, 5, 1.0), ("start", "c1", 101, 6, 1.05),
                        ("end", "c0", 100, 5, 1.1), ("end", "c1", 101, 6, 1.2)))
        self.assertEqual((row.overlaps, row.verdict), (1, "FAIL"))
        self.assertIn("2 holders", row.examples[0])

    def test_a_semaphore_allows_n_and_no_more(self):
        two = [("start", "c0", 100, 5, 1.0), ("start", "c1", 101, 6, 1.05)]
        ends = [("end", "c0", 100, 5, 1.3), ("end", "c1", 101, 6, 1.3)]
        self.assertEqual(judge(log(*two, *ends), n=2).verdict, "ok")
        third = [("start", "c2", 102, 7, 1.1), ("end", "c2", 102, 7, 1.2)]
        row = judge(log(*two, *third, *ends), n=2)
        self.assertEqual((row.overlaps, row.verdict), (1, "FAIL"))

    def test_a_start_before_a_killed_child_was_last_seen_alive_is_an_overlap(self):
        # Killed: no end line; found alive at 1.09, found gone at 1.1.
        killed = Section(5, 100, 1.0, "victim", end=1.1, how="killed", alive_at=1.09)
        row = check(Row("test", "synthetic", 1),
                    [killed, Section(6, 101, 1.05, "c1", end=1.2, how="done")], expect={100: None})
        self.assertEqual((row.overlaps, row.unresolved, row.verdict), (1, 0, "FAIL"))

    def test_a_start_within_a_killed_childs_last_poll_is_unresolved_not_an_overlap(self):
        killed = Section(5, 100, 1.0, "victim", end=1.1, how="killed", alive_at=1.09)
        row = check(Row("test", "synthetic", 1),
                    [killed, Section(6, 101, 1.095, "c1", end=1.2, how="done")], expect={100: None})
        self.assertEqual((row.overlaps, row.unresolved, row.verdict), (0, 1, "ok"))

    def test_touching_sections_do_not_overlap(self):
        row = judge(log(("start", "c0", 100, 5, 1.0), ("end", "c0", 100, 5, 1.1),
                        ("start", "c1", 101, 6, 1.1), ("end", "c1", 101, 6, 1.2)))
        self.assertEqual(row.verdict, "ok")

    def test_token_going_backwards_is_stale(self):
        row = judge(log(("start", "c0", 100, 5, 1.0), ("end", "c0", 100, 5, 1.1),
                        ("start", "c1", 101, 1, 1.2), ("end", "c1", 101, 1, 1.3)))
        self.assertEqual((row.stale_tokens, row.verdict), (1, "FAIL"))
        self.assertIn("token 1", row.examples[0])

    def test_a_repeated_token_is_stale(self):
        row = judge(log(("start", "c0", 100, 5, 1.0), ("end", "c0", 100, 5, 1.1),
                        ("start", "c1", 101, 5, 1.2), ("end", "c1", 101, 5, 1.3)))
        self.assertEqual(row.stale_tokens, 1)

    def test_a_missing_token_is_stale(self):
        row = judge(log(("start", "c0", 100, "-", 1.0), ("end", "c0", 100, "-", 1.1)))
        self.assertEqual((row.stale_tokens, row.verdict), (1, "FAIL"))

    def test_semaphore_tokens_need_only_rise_after_an_earlier_start(self):
        # c1 acquired first (token 6) but logged its start second: fine while both were already
        # started (spawned) before either began.
        racing = log(("start", "c0", 100, 7, 1.00, 0.9), ("start", "c1", 101, 6, 1.01, 0.9),
                     ("end", "c0", 100, 7, 1.1), ("end", "c1", 101, 6, 1.1))
        self.assertEqual(judge(racing, n=2).verdict, "ok")
        # c2's lock started after c0's child had started, so it acquired later: token must rise.
        late = log(("start", "c0", 100, 7, 1.00, 0.9), ("end", "c0", 100, 7, 1.1),
                   ("start", "c2", 102, 6, 1.3, 1.05), ("end", "c2", 102, 6, 1.4))
        row = judge(late, n=2)
        self.assertEqual((row.stale_tokens, row.verdict), (1, "FAIL"))

    def test_stop_after_the_lease_deadline_is_an_overrun(self):
        text = log(("start", "victim0", 100, 5, 1.0), ("end", "victim0", 100, 5, 9.5, "stopped"))
        row = judge(text, deadlines={100: 9.0}, expect={100: "stop"})
        self.assertEqual((row.overruns, row.verdict), (1, "FAIL"))
        self.assertAlmostEqual(row.worst_overrun, 0.5)
        self.assertAlmostEqual(row.closest, 0.5)

    def test_stop_before_the_lease_deadline_passes(self):
        text = log(("start", "victim0", 100, 5, 1.0), ("end", "victim0", 100, 5, 8.0, "stopped"))
        row = judge(text, deadlines={100: 9.0}, expect={100: "stop"})
        self.assertEqual(row.verdict, "ok")
        self.assertAlmostEqual(row.closest, -1.0)

    def test_a_victim_that_was_never_stopped_fails_stop(self):
        text = log(("start", "victim0", 100, 5, 1.0), ("end", "victim0", 100, 5, 8.0))
        row = judge(text, deadlines={100: 9.0}, expect={100: "stop"})
        self.assertEqual(row.verdict, "FAIL")
        self.assertIn("never noticed", row.problems[0])

    def test_a_stop_victim_without_a_known_deadline_fails(self):
        text = log(("start", "victim0", 100, 5, 1.0), ("end", "victim0", 100, 5, 8.0, "stopped"))
        self.assertEqual(judge(text, expect={100: "stop"}).verdict, "FAIL")

    def test_survive_victim_stopped_fails(self):
        text = log(("start", "victim0", 100, 5, 1.0), ("end", "victim0", 100, 5, 3.0, "stopped"))
        row = judge(text, expect={100: "survive"})
        self.assertEqual(row.verdict, "FAIL")
        self.assertIn("ridden out", row.problems[0])
        text = log(("start", "victim0", 100, 5, 1.0), ("end", "victim0", 100, 5, 3.0))
        self.assertEqual(judge(text, expect={100: "survive"}).verdict, "ok")

    def test_a_contender_stopped_with_no_fault_is_a_false_loss(self):
        text = log(("start", "c0", 100, 5, 1.0), ("end", "c0", 100, 5, 1.1, "stopped"))
        self.assertEqual(judge(text, ending_at=5.0).verdict, "FAIL")
        self.assertEqual(judge(text, ending_at=1.05).verdict, "ok")  # asked to stop, it stopped
        self.assertEqual(judge(text, ending_at=5.0, losses_allowed=True).verdict, "ok")

    def test_paused_holder_overlap_is_allowed_only_with_a_higher_token(self):
        # The victim's lock was paused beyond its TTL (lease deadline 5.0); c1 took over at 6.0.
        paused = [("start", "victim0", 100, 5, 1.0), ("start", "c1", 101, 6, 6.0),
                  ("end", "c1", 101, 6, 6.5), ("end", "victim0", 100, 5, 9.0, "killed")]
        row = judge(log(*paused), allowed={100}, deadlines={100: 5.0}, expect={100: None})
        self.assertEqual((row.overlaps, row.allowed_overlaps, row.stale_tokens, row.overruns,
                          row.verdict), (0, 1, 0, 0, "ok"))
        paused[1], paused[2] = ("start", "c1", 101, 4, 6.0), ("end", "c1", 101, 4, 6.5)
        row = judge(log(*paused), allowed={100}, deadlines={100: 5.0}, expect={100: None})
        self.assertEqual((row.allowed_overlaps, row.verdict), (1, "FAIL"))
        self.assertGreaterEqual(row.stale_tokens, 1)

    def test_paused_holder_excuses_nothing_before_its_lease_could_expire(self):
        paused = log(("start", "victim0", 100, 5, 1.0), ("start", "c1", 101, 6, 3.0),
                     ("end", "c1", 101, 6, 3.5), ("end", "victim0", 100, 5, 9.0, "killed"))
        row = judge(paused, allowed={100}, deadlines={100: 5.0}, expect={100: None})
        self.assertEqual((row.overlaps, row.verdict), (1, "FAIL"))

    def test_paused_holder_does_not_hide_an_overlap_of_two_others(self):
        text = log(("start", "victim0", 100, 5, 1.0), ("start", "c1", 101, 6, 6.0),
                   ("start", "c2", 102, 7, 6.1), ("end", "c1", 101, 6, 6.5),
                   ("end", "c2", 102, 7, 6.6), ("end", "victim0", 100, 5, 9.0, "killed"))
        row = judge(text, allowed={100}, deadlines={100: 5.0}, expect={100: None})
        self.assertEqual((row.overlaps, row.verdict), (1, "FAIL"))

    def test_a_child_that_never_ended_fails(self):
        row = judge(log(("start", "c0", 100, 5, 1.0)))
        self.assertEqual(row.verdict, "FAIL")

    def test_expected_failures_xfail_xpass_and_other_kinds_still_fail(self):
        backwards = log(("start", "c0", 100, 5, 1.0), ("end", "c0", 100, 5, 1.1),
                        ("start", "c1", 101, 1, 1.2), ("end", "c1", 101, 1, 1.3))
        sections, _ = read_log(backwards)
        row = check(Row("t", "f", 1, expected=("stale_tokens", "known")), sections)
        self.assertEqual((row.verdict, row.failed), ("xfail", False))
        sections, _ = read_log(CLEAN)
        row = check(Row("t", "f", 1, expected=("stale_tokens", "known")), sections)
        self.assertEqual((row.verdict, row.failed), ("XPASS", False))
        overlap = log(("start", "c0", 100, 5, 1.0), ("start", "c1", 101, 6, 1.05),
                      ("end", "c0", 100, 5, 1.1), ("end", "c1", 101, 6, 1.2))
        sections, _ = read_log(overlap)
        row = check(Row("t", "f", 1, expected=("stale_tokens", "known")), sections)
        self.assertEqual((row.verdict, row.failed), ("FAIL", True))
        # A fault known to show in two ways: either, or both, is an xfail; a third still fails.
        row = check(Row("t", "f", 1, expected=(("overlaps", "stale_tokens"), "known")), sections)
        self.assertEqual((row.verdict, row.failed), ("xfail", False))
        row.problems.append("something else")
        self.assertEqual((row.verdict, row.failed), ("FAIL", True))

    def test_table_has_a_row_per_scenario_and_a_total_per_backend(self):
        sections, _ = read_log(CLEAN)
        rows = [check(Row("local", "none", 1), sections),
                check(Row("etcd", "none", 1), read_log(CLEAN)[0])]
        text = table(rows)
        self.assertIn("verdict", text.splitlines()[0])
        self.assertEqual(sum(line.startswith("total ") for line in text.splitlines()), 2)
        self.assertIn("total local: 1 scenarios, 3 sections, 0 overlaps", text)

    # ---- the register --------------------------------------------------------------------------

    # Three sections of CLEAN, each reading what the one before wrote.
    SERIAL = (("R", 100, 5), ("W", 100, 5), ("R", 101, 6), ("W", 101, 6), ("R", 102, 9),
              ("W", 102, 9))

    def test_serial_read_modify_writes_lose_nothing(self):
        logs = history(*self.SERIAL)
        self.assertEqual((logs["checked"].final, logs["unchecked"].final), (3, 3))
        row = judge(CLEAN, registers=logs)
        self.assertEqual((row.lost_checked, row.lost_unchecked, row.refused, row.verdict),
                         (0, 0, 0, "ok"))

    # The whole client paused: the victim (token 5) read 0, two successors (6, 7) each read and
    # wrote, then the victim wrote 1 from its stale read. Their sections overlap the victim's.
    STALE = (("R", 100, 5), ("R", 101, 6), ("W", 101, 6), ("R", 102, 7), ("W", 102, 7),
             ("W", 100, 5))
    STALE_LOG = log(("start", "victim0", 100, 5, 1.0), ("start", "c1", 101, 6, 6.0),
                    ("end", "c1", 101, 6, 6.1), ("start", "c2", 102, 7, 6.2),
                    ("end", "c2", 102, 7, 6.3), ("end", "victim0", 100, 5, 7.0))

    def test_a_stale_write_loses_updates_only_without_the_token_check(self):
        logs = history(*self.STALE)
        # Unchecked: 3 acknowledged, final 1 (the victim's 0 + 1 over c2's 2): 2 lost.
        self.assertEqual((logs["unchecked"].acknowledged, logs["unchecked"].final,
                          logs["unchecked"].lost), (3, 1, 2))
        # Checked: the victim's write is refused (token 5 below 7): nothing lost.
        self.assertEqual((logs["checked"].acknowledged, logs["checked"].final,
                          logs["checked"].lost, logs["checked"].refused), (2, 2, 0, 1))

    def test_unchecked_losses_fail_a_row_where_no_overlap_is_allowed(self):
        row = judge(CLEAN, registers=history(*self.STALE))
        self.assertEqual((row.lost_unchecked, row.lost_updates, row.verdict), (2, 2, "FAIL"))
        self.assertIn("lost_updates", row.kinds())
        self.assertIn("erasing the 2 update(s)", row.examples[0])

    def test_unchecked_losses_are_allowed_where_the_overlap_is(self):
        row = judge(self.STALE_LOG, allowed={100}, deadlines={100: 5.0}, expect={100: None},
                    registers=history(*self.STALE))
        self.assertEqual((row.overlaps, row.allowed_overlaps, row.lost_checked,
                          row.lost_unchecked, row.lost_updates, row.refused, row.verdict),
                         (0, 2, 0, 2, 0, 1, "ok"))
        self.assertTrue(any("erasing the 2 update(s)" in note for note in row.notes))

    def test_a_checked_loss_fails_even_where_the_overlap_is_allowed(self):
        # A store that fenced writes alone would take the victim's write here: it comes after
        # c1's read (token 6) but before c1's write. The token on reads is what refuses it.
        ops = (("R", 100, 5), ("R", 101, 6), ("W", 100, 5), ("W", 101, 6))
        self.assertEqual(history(*ops)["checked"].lost, 0)
        logs = history(*ops)
        logs["checked"] = logs["unchecked"]  # as if the checked register had taken every write
        row = judge(self.STALE_LOG, allowed={100}, deadlines={100: 5.0}, expect={100: None},
                    registers=logs)
        self.assertEqual((row.lost_checked, row.verdict), (1, "FAIL"))

    def test_a_restoring_write_leaves_the_stale_writers_own_increment_lost(self):
        # c1 read before the victim's stale write and wrote after it: the 2 updates the victim
        # erased come back, its own is gone (as a set would lose its element).
        ops = (("R", 100, 5), ("R", 101, 6), ("W", 101, 6), ("R", 102, 7), ("W", 102, 7),
               ("R", 103, 8), ("W", 100, 5), ("W", 103, 8))
        logs = history(*ops)
        self.assertEqual((logs["unchecked"].acknowledged, logs["unchecked"].final,
                          logs["unchecked"].lost), (4, 3, 1))
        self.assertEqual([w.erased for w in logs["unchecked"].writes], [0, 0, 2, -1])

    def test_no_token_means_no_write_to_the_checked_register(self):
        logs = history(("R", 100, "-"), ("W", 100, "-"))
        self.assertEqual((logs["checked"].final, logs["checked"].refused,
                          logs["unchecked"].final), (0, 1, 1))

    def test_a_section_done_without_its_write_is_a_problem(self):
        row = judge(CLEAN, registers=history(*self.SERIAL[:4]))
        self.assertEqual(row.verdict, "FAIL")
        self.assertIn("without writing the register", row.problems[0])

    def test_table_shows_lost_updates_per_register(self):
        with_register = judge(CLEAN, registers=history(*self.SERIAL))
        without = check(Row("etcd", "none", 2), read_log(CLEAN)[0])
        lines = table([with_register, without]).splitlines()
        self.assertIn("lost checked", lines[0])
        self.assertIn("lost unchecked", lines[0])
        # backend, fault, n, sections, overlaps, stale, then the two registers' losses
        self.assertEqual(lines[2].split()[6:8], ["0", "0"])
        self.assertEqual(lines[3].split()[6:8], ["-", "-"])  # n = 2: no register
        self.assertIn("lost updates 0 checked, 0 unchecked (0 allowed)", table([with_register]))

    def test_a_wrong_message_is_a_kind_of_its_own(self):
        sections, _ = read_log(CLEAN)
        row = check(Row("t", "f", 1, expected=("messages", "known")), sections)
        row.messages.append("said two lines")
        self.assertEqual((row.verdict, row.failed), ("xfail", False))
        row.problems.append("something else")
        self.assertEqual((row.verdict, row.failed), ("FAIL", True))


if __name__ == "__main__":
    unittest.main()
