#!/usr/bin/env bash
# The fault harness at full size: every backend (local, Consul through its test double, a real
# etcd, a real ZooKeeper and a real PostgreSQL on loopback), every fault, -n 1 and -n 2, at least
# 10,000 critical sections per backend, each fault met again every CHAOS_GAP sections. Prints the
# checker's table and a total line per backend, both with the updates lost from the register the
# -n 1 sections share, with and without the fencing-token check (only a pause of the whole client
# may lose them, and only without the check); exits 1 if any row failed (see
# tests/chaos/checker.py for what each column proves).
#
#   bench/chaos.sh                         # build/lock, or LOCK_BIN=/path/to/lock
#   bench/chaos.sh --faults blackhole      # extra arguments go to tests/chaos/run.py
#   CHAOS_BACKENDS=zookeeper CHAOS_SECTIONS=2000 bench/chaos.sh
#   CHAOS_BACKENDS=postgres LOCK_BIN=build/lock bench/chaos.sh
#
# How long: 27 minutes on a 2-core machine with the defaults before ZooKeeper joined (Consul and
# etcd side by side, then local; about 1.4 cores busy), and ZooKeeper's scenarios need about 9
# minutes of a lane more (measured alone: 5,200 sections, CHAOS_GAP=60, CHAOS_SPLIT=2, in 5.5
# minutes). PostgreSQL's alone take 14 minutes (CHAOS_BACKENDS=postgres: 32 scenarios, 10,279
# sections in one lane, the machine otherwise idle). CHAOS_SECTIONS=2000 still meets
# every fault, in about 15 minutes: the faults' own lengths (TTLs, pauses) then dominate.
# Knobs (environment): CHAOS_BACKENDS (local,consul,etcd,zookeeper,postgres), CHAOS_SECTIONS (per
# backend, 10000), CHAOS_GAP (sections between two meetings of the fault, 150), CHAOS_SPLIT
# (lanes per server backend, each with a server of its own, 1), CHAOS_JOBS (lanes side by side, 2),
# CHAOS_THINK (a contender's longest pause between runs, in seconds, 0), CHAOS_SEED (1),
# CHAOS_WORKDIR (keep the logs there).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
lock_bin=${LOCK_BIN:-$root/build/lock}
case $lock_bin in /*) ;; *) lock_bin=$PWD/$lock_bin ;; esac
backends=${CHAOS_BACKENDS:-local,consul,etcd,zookeeper,postgres}
tools=("$lock_bin" "$(command -v etcd || true)" "$(command -v perl || true)")
if [[ ,$backends, == *,zookeeper,* ]]; then tools+=("$(command -v java || true)"); fi
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
if [[ ,$backends, == *,postgres,* ]]; then
  tools+=("${pg_bin:-/nonexistent}/initdb" "$(command -v psql || true)")
fi
for tool in "${tools[@]}"; do
  if [[ -z $tool || ! -x $tool ]]; then
    echo "chaos.sh: needs $lock_bin, etcd, perl, java for ZooKeeper and initdb and psql for" \
      "PostgreSQL (packages etcd-server, perl, zookeeper, python3-kazoo, postgresql:" \
      "scripts/install-deps.sh)" >&2
    exit 1
  fi
done

echo "== Machine"
echo "   nproc:  $(nproc)"
echo "   kernel: $(uname -srm)"
echo "   load:   $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   lock:   $("$lock_bin" -version) ($lock_bin)"
echo "   etcd:   $(etcd --version | head -n1)"
echo "   zookeeper: $(dpkg-query -W -f '${Version}' zookeeper 2>/dev/null || echo '?') (Debian's package)"
echo "   postgres: $("${pg_bin:-/nonexistent}/postgres" --version 2>/dev/null || echo '?')"
echo

args=(--backends "$backends" --n 1,2
      --sections-per-backend "${CHAOS_SECTIONS:-10000}" --gap "${CHAOS_GAP:-150}"
      --split "${CHAOS_SPLIT:-1}" --jobs "${CHAOS_JOBS:-2}" --think "${CHAOS_THINK:-0}" --seed "${CHAOS_SEED:-1}"
      --lock "$lock_bin")
[[ -n ${CHAOS_WORKDIR:-} ]] && args+=(--workdir "$CHAOS_WORKDIR")
start=$SECONDS
status=0
PYTHONDONTWRITEBYTECODE=1 python3 "$root/tests/chaos/run.py" "${args[@]}" "$@" || status=$?
echo "== $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
exit "$status"
