#!/usr/bin/env bash
# The ZooKeeper backend against kazoo's Lock and Apache Curator's InterProcessMutex, in one run,
# on one ZooKeeper server started here (on a free loopback port, in a temporary directory,
# stopped at the end). Prints medians and ratios.
#
#   bench/zookeeper.sh                       # uses build/lock (which hands over to build/lock-zookeeper)
#   LOCK_BIN=/path/to/lock bench/zookeeper.sh
#
# Knobs (environment): BENCH_REPS (uncontended runs of lock and kazoo, 60), BENCH_JVM_REPS (of
# Curator, whose JVM takes most of a second to start, 5), BENCH_CONTENDERS (8), BENCH_ROUNDS
# (rounds per contender, 25), BENCH_TRIALS (contended trials per tool, 3).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
lock_bin=${LOCK_BIN:-$root/build/lock}
case $lock_bin in /*) ;; *) lock_bin=$PWD/$lock_bin ;; esac
if [[ ! -x $lock_bin ]] || ! /usr/bin/python3 -c 'import kazoo' 2>/dev/null || ! command -v java >/dev/null; then
  echo "zookeeper.sh: needs $lock_bin, python3-kazoo, a JDK and Curator (scripts/install-deps.sh)" >&2
  exit 1
fi

echo "== Machine"
echo "   nproc:   $(nproc)"
echo "   kernel:  $(uname -srm)"
echo "   load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   lock:    $("$lock_bin" -version) ($lock_bin)"
echo "   java:    $(java -version 2>&1 | head -n1)"
echo "   kazoo:   $(/usr/bin/python3 -c 'import kazoo.version; print(kazoo.version.__version__)')"
echo

exec python3 "$here/zookeeper_bench.py" --lock "$lock_bin" \
  --reps "${BENCH_REPS:-60}" --jvm-reps "${BENCH_JVM_REPS:-5}" \
  --contenders "${BENCH_CONTENDERS:-8}" --rounds "${BENCH_ROUNDS:-25}" --trials "${BENCH_TRIALS:-3}"
