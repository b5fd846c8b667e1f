#!/usr/bin/env bash
# The etcd backend against `etcdctl lock`, in one run, on one etcd server started here (on free
# loopback ports, in a temporary directory, stopped at the end). Prints medians and ratios.
#
#   bench/etcd.sh                       # uses build/lock (which hands over to build/lock-net)
#   LOCK_BIN=/path/to/lock bench/etcd.sh
#
# Knobs (environment): BENCH_REPS (uncontended runs per tool, 100), BENCH_CONTENDERS (8),
# BENCH_ROUNDS (rounds per contender, 25), BENCH_TRIALS (contended trials per tool, 3).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
lock_bin=${LOCK_BIN:-$root/build/lock}
case $lock_bin in /*) ;; *) lock_bin=$PWD/$lock_bin ;; esac
for tool in "$lock_bin" "$(command -v etcd || true)" "$(command -v etcdctl || true)"; do
  if [[ -z $tool || ! -x $tool ]]; then
    echo "etcd.sh: needs $lock_bin, etcd and etcdctl (packages etcd-server, etcd-client)" >&2
    exit 1
  fi
done

echo "== Machine"
echo "   nproc:   $(nproc)"
echo "   kernel:  $(uname -srm)"
echo "   load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   lock:    $("$lock_bin" -version) ($lock_bin)"
echo "   etcd:    $(etcd --version | head -n1)"
echo "   etcdctl: $(ETCDCTL_API=3 etcdctl version | head -n1)"
echo

exec python3 "$here/etcd_bench.py" --lock "$lock_bin" \
  --reps "${BENCH_REPS:-100}" --contenders "${BENCH_CONTENDERS:-8}" \
  --rounds "${BENCH_ROUNDS:-25}" --trials "${BENCH_TRIALS:-3}"
