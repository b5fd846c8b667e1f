"""Counting the CPU time of processes that outlive the command a bench started.

`lock`'s watchdog ends a moment after `lock` does, is re-parented, and its time is then in nobody's
wait4: a bench that reads a command's CPU time from wait4 alone would leave it out. A bench process
that adopts orphans (a child subreaper) and reaps them finds them in its RUSAGE_CHILDREN too.
"""
import ctypes
import os
import time

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def adopt():
    """Makes the orphaned descendants of this process its own children; not inherited by fork."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")


def reap(timeout=10.0):
    """Reaps every child this process has left (adopted orphans, once the command it started was
    waited for), waiting up to `timeout` s for those still running, so that their usage is in this
    process's RUSAGE_CHILDREN. One still running then is left for a later call."""
    deadline = time.monotonic() + timeout
    delay = 0.0001
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # none left
        if pid:
            continue
        if time.monotonic() > deadline:
            return
        time.sleep(delay)  # a watchdog ends within a millisecond of lock
        delay = min(delay * 2, 0.01)
