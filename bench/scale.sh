#!/usr/bin/env bash
# A fleet at the top of the minute: N contenders started at once on one prefix, each child
# holding 20 ms, beside the peer on the same server (started here, on free loopback ports, in a
# temporary directory). Prints, per backend and N, the drain time, the server's requests and CPU
# per contender and the client's peak RSS, each beside the peer's, with ratios. etcd only, so far.
#
#   bench/scale.sh                        # N = 10, 100, 200
#   BENCH_SCALE_N=50,1000 bench/scale.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
lock_bin=${LOCK_BIN:-$root/build/lock}
case $lock_bin in /*) ;; *) lock_bin=$PWD/$lock_bin ;; esac
for tool in "$lock_bin" "$(command -v etcd || true)" "$(command -v etcdctl || true)" /usr/bin/time; do
  if [[ -z $tool || ! -x $tool ]]; then
    echo "scale.sh: needs $lock_bin, etcd, etcdctl and GNU time (packages etcd-server, etcd-client, time)" >&2
    exit 1
  fi
done

echo "== Machine"
echo "   nproc:   $(nproc)"
echo "   load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   lock:    $("$lock_bin" -version) ($lock_bin)"
echo "   etcd:    $(etcd --version | head -n1)"
echo
echo "== Fleet: N contenders at once on one prefix, child 20 ms"
exec python3 "$here/scale_bench.py" --lock "$lock_bin" --n "${BENCH_SCALE_N:-10,100,200}"
