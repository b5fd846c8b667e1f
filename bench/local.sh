#!/usr/bin/env bash
# Local backend against the tools it replaces on one machine: flock(1) from util-linux for a lock,
# GNU parallel's sem for a semaphore. Prints medians and ratios side by side; installs nothing.
#
#   bench/local.sh                      # uses build/lock
#   LOCK_BIN=/path/to/lock bench/local.sh
#
# Knobs (environment): BENCH_REPS (uncontended runs per variant, 300), BENCH_CONTENDERS (8),
# BENCH_ROUNDS (rounds per contender, 25), BENCH_SEM_ROUNDS (rounds per contender for sem, 3),
# BENCH_TRIALS (contended trials per tool, 3).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
lock_bin=${LOCK_BIN:-$root/build/lock}
case $lock_bin in /*) ;; *) lock_bin=$PWD/$lock_bin ;; esac
if [[ ! -x $lock_bin ]]; then
  echo "local.sh: no lock binary at $lock_bin (build it, or set LOCK_BIN)" >&2
  exit 1
fi
if ! command -v python3 >/dev/null; then
  echo "local.sh: python3 is needed" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/lock-bench.XXXXXX")
cleanup() { rm -rf -- "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

flock_bin=$(command -v flock || true)
sem_bin=$(command -v sem || true)

echo "== Machine"
echo "   nproc:   $(nproc)"
echo "   kernel:  $(uname -srm)"
echo "   cpu:     $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
echo "   load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   lock:    $("$lock_bin" -version) ($lock_bin)"
if [[ -n $flock_bin ]]; then
  echo "   flock:   $("$flock_bin" --version 2>&1 | head -n1) ($flock_bin)"
else
  echo "   flock:   not installed (util-linux flock): its comparisons are skipped"
fi
if [[ -n $sem_bin ]]; then
  echo "   sem:     $("$sem_bin" --version 2>/dev/null | head -n1) ($sem_bin)"
else
  echo "   sem:     not installed (package parallel): the semaphore comparison is skipped"
fi
echo "   sh:      /bin/sh -> $(readlink -f /bin/sh)"
echo "   python:  $(python3 --version 2>&1)"
echo "   state:   $work ($(df -PT "$work" | awk 'NR == 2 { print $2 }') file system; removed at exit)"
echo

python3 "$here/local_bench.py" \
  --lock "$lock_bin" --flock "$flock_bin" --sem "$sem_bin" --work "$work" \
  --reps "${BENCH_REPS:-300}" --contenders "${BENCH_CONTENDERS:-8}" \
  --rounds "${BENCH_ROUNDS:-25}" --sem-rounds "${BENCH_SEM_ROUNDS:-3}" \
  --trials "${BENCH_TRIALS:-3}"
