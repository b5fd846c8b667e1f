#!/usr/bin/env bash
# A fleet at the top of the minute: N contenders started at once on one prefix, each child
# holding 20 ms, beside the peer on the same server (started here, on free loopback ports, in a
# temporary directory). Prints, per backend and N, the drain time, the server's requests and CPU
# per contender and the client's peak RSS, each beside the peer's, with ratios: flock(1) on the
# local backend (with fairness), etcdctl lock on etcd, kazoo's Lock on ZooKeeper, the port of
# Go's client on the Consul API double (requests only: a double is no server to time), and
# withlock (npm advisory-lock) on PostgreSQL at -n 1, -n 2 having no peer (statements for
# requests; the server's CPU per contender, lock's from the smallest N to the largest).
#
#   bench/scale.sh                        # N = 10, 100, 200, every backend
#   BENCH_SCALE_N=50,1000 BENCH_SCALE_BACKENDS=etcd,zookeeper bench/scale.sh
#   BENCH_SCALE_BACKENDS=postgres bench/scale.sh
#   BENCH_SCALE_TRY=1000 bench/scale.sh   # and the try path: 1,000 runs of -timeout 100ms at once
#                                         # against one holder, and what they leave on the server
#   BENCH_SCALE_HOLD_MS=200 BENCH_SCALE_BACKENDS=consul bench/scale.sh
#                                         # children holding 200 ms instead of 20
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
lock_bin=${LOCK_BIN:-$root/build/lock}
case $lock_bin in /*) ;; *) lock_bin=$PWD/$lock_bin ;; esac
for tool in "$lock_bin" "$(command -v etcd || true)" "$(command -v etcdctl || true)" /usr/bin/time \
            /usr/bin/flock "$(command -v java || true)"; do
  if [[ -z $tool || ! -x $tool ]]; then
    echo "scale.sh: needs $lock_bin, etcd, etcdctl, GNU time, flock and java (packages etcd-server," \
         "etcd-client, time, util-linux, zookeeper, python3-kazoo)" >&2
    exit 1
  fi
done

backends=${BENCH_SCALE_BACKENDS:-local,etcd,zookeeper,consul,postgres}
if [[ ,$backends, == *,postgres,* ]] && { ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
     || ! command -v psql >/dev/null || ! command -v node >/dev/null \
     || [[ ! -x /opt/lock-test-peers/node_modules/.bin/withlock ]]; }; then
  echo "scale.sh: the postgres backend needs postgresql, postgresql-client, node and withlock" \
       "(scripts/install-deps.sh)" >&2
  exit 1
fi

echo "== Machine"
echo "   nproc:   $(nproc)"
echo "   load:    $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   lock:    $("$lock_bin" -version) ($lock_bin)"
echo "   etcd:    $(etcd --version | head -n1)"
if [[ ,$backends, == *,postgres,* ]]; then
  echo "   psql:    $(psql --version)"
fi
echo
hold_ms=${BENCH_SCALE_HOLD_MS:-20}
echo "== Fleet: N contenders at once on one prefix, child $hold_ms ms"
exec python3 "$here/scale_bench.py" --lock "$lock_bin" --n "${BENCH_SCALE_N:-10,100,200}" \
  --backends "$backends" --try-n "${BENCH_SCALE_TRY:-0}" \
  --hold-ms "$hold_ms"
