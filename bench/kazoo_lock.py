#!/usr/bin/python3
"""kazoo's Lock as bench/zookeeper.sh's Python peer: connects, then `rounds` times acquires the
lock on `path`, runs `command` (if any) and releases; closes the session. Prints the mean
milliseconds per acquire+release after connecting, as the in-process figure.

    kazoo_lock.py <connect> <path> <rounds> [command...]
"""
import logging
import subprocess
import sys
import time

from kazoo.client import KazooClient

logging.getLogger("kazoo").addHandler(logging.NullHandler())


def main():
    connect, path, rounds, command = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    zk = KazooClient(hosts=connect, timeout=10)
    zk.start()
    lock = zk.Lock(path)
    t0 = time.perf_counter()
    for _ in range(rounds):
        with lock:
            if command:
                subprocess.run(command, check=True)
    per = (time.perf_counter() - t0) * 1e3 / rounds
    zk.stop()
    zk.close()
    print(f"{per:.3f}")


if __name__ == "__main__":
    main()
