#!/usr/bin/env bash
# The Consul backend against the Go client's `consul lock` (tests/consul_double/consul_peer.py,
# a port of Consul's api.Lock, api.Semaphore and command/lock), side by side on one Consul HTTP
# API double started here on free loopback ports and stopped at the end. Prints, for -n 1 and
# -n 3, the API requests per uncontended acquisition and the time from the loss of the lock
# (the session destroyed by an operator) to SIGTERM in the child, each with the command that
# reproduces it; then lock's peak RSS, and a summary table.
#
#   bench/consul.sh                       # uses build/lock (which hands over to build/lock-net)
#   LOCK_BIN=/path/to/lock bench/consul.sh
#
# Knobs (environment): BENCH_RUNS (runs per line, 9), BENCH_MEASURE (requests, loss or all),
# BENCH_TOOL (lock, peer or both), BENCH_N (holder limits, "1,3").
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
lock_bin=${LOCK_BIN:-$root/build/lock}
case $lock_bin in /*) ;; *) lock_bin=$PWD/$lock_bin ;; esac
if [[ ! -x $lock_bin ]]; then
  echo "consul.sh: needs $lock_bin (build it first, or set LOCK_BIN)" >&2
  exit 1
fi
if ! command -v python3 >/dev/null; then
  echo "consul.sh: needs python3 for the Consul double and the Go client port" >&2
  exit 1
fi

echo "== Machine"
echo "   nproc:   $(nproc)"
echo "   kernel:  $(uname -srm)"
echo "   load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   lock:    $("$lock_bin" -version) ($lock_bin)"
echo "   python:  $(python3 --version 2>&1) (the double and the Go client port)"
echo

exec python3 "$here/consul_bench.py" --lock "$lock_bin" --runs "${BENCH_RUNS:-9}" \
  --measure "${BENCH_MEASURE:-all}" --tool "${BENCH_TOOL:-both}" --n "${BENCH_N:-1,3}"
