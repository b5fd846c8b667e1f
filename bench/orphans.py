"""Counting the CPU time of processes that outlive the command a bench started.

`lock`'s watchdog ends a moment after `lock` does, is re-parented, and its time is then in nobody's
wait4: a bench that reads a command's CPU time from wait4 alone would leave it out. A bench process
that adopts orphans (a child subreaper) and reaps them counts them too.
"""
import ctypes
import os

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def adopt():
    """Makes the orphaned descendants of this process its own children; not inherited by fork."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")


def reap():
    """Waits for every child this process has left (adopted orphans, once the command it started
    was waited for); returns their CPU time in ms and their context switches."""
    cpu_ms, switches = 0.0, 0
    while True:
        try:
            _, _, ru = os.wait4(-1, 0)
        except ChildProcessError:
            return cpu_ms, switches
        cpu_ms += (ru.ru_utime + ru.ru_stime) * 1e3
        switches += ru.ru_nvcsw + ru.ru_nivcsw
