#!/usr/bin/env bash
# The PostgreSQL backend against withlock (npm advisory-lock, which takes the same advisory lock
# for a name) and psql-lock (one psql session holding pg_advisory_lock while the command runs, as
# a team would write it by hand; postgres_bench.py's PSQL_LOCK), in one run, on one PostgreSQL
# server started here (tests/e2e/postgres_server.py: a free loopback port, a temporary directory,
# stopped at the end). Prints medians and ratios, taken between runs made in turn.
#
#   bench/postgres.sh                       # uses build/lock (which hands over to build/lock-postgres)
#   LOCK_BIN=/path/to/lock bench/postgres.sh
#
# Knobs (environment): BENCH_REPS (uncontended rounds, each a run of every tool, 60),
# BENCH_CONTENDERS (8), BENCH_ROUNDS (runs per contender, 10), BENCH_TRIALS (handoff trials per
# tool, 3).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
lock_bin=${LOCK_BIN:-$root/build/lock}
case $lock_bin in /*) ;; *) lock_bin=$PWD/$lock_bin ;; esac
withlock=/opt/lock-test-peers/node_modules/.bin/withlock
if [[ ! -x $lock_bin || ! -x $withlock ]] || ! command -v psql >/dev/null || ! command -v node >/dev/null \
   || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "postgres.sh: needs $lock_bin, postgresql, postgresql-client, node and withlock" \
       "(scripts/install-deps.sh)" >&2
  exit 1
fi

echo "== Machine"
echo "   nproc:    $(nproc)"
echo "   kernel:   $(uname -srm)"
echo "   load:     $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   lock:     $("$lock_bin" -version) ($lock_bin)"
echo "   psql:     $(psql --version)"
echo "   withlock: advisory-lock $(node -p 'require("/opt/lock-test-peers/node_modules/advisory-lock/package.json").version'), node $(node --version)"
echo

exec python3 "$here/postgres_bench.py" --lock "$lock_bin" \
  --reps "${BENCH_REPS:-60}" --contenders "${BENCH_CONTENDERS:-8}" \
  --rounds "${BENCH_ROUNDS:-10}" --trials "${BENCH_TRIALS:-3}"
