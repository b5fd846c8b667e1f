"""The flags operators of cron jobs and systemd units use, on the local backend (each server
backend's own test file runs the same tests on it)."""

import os
import shutil
import unittest

from harness import PATH_CHECK_PERIOD, LockTestCase, OperatorFlags


class LocalOperatorsTest(OperatorFlags, LockTestCase):
    LOSS_BOUND = PATH_CHECK_PERIOD + 1

    def setUp(self):
        super().setUp()
        self.prefix = "p"

    def lose(self):
        # The holder's lock file goes with its directory: a newcomer would make a fresh one.
        shutil.rmtree(os.path.join(self.state, self.prefix))


if __name__ == "__main__":
    unittest.main()
