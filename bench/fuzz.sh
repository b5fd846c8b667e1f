#!/usr/bin/env bash
# The fuzz targets' throughput: configures and builds build-fuzz/ with clang if needed (see
# tests/fuzz/CMakeLists.txt), runs each target for a number of executions starting from its seed
# corpus, and prints a table: target, executions, exec/s, corpus size, crashes.
#
#   bench/fuzz.sh                   # 10000000 executions per target
#   bench/fuzz.sh 1000000
#   bench/fuzz.sh 10000000 fuzz_duration fuzz_http_response   # only these targets
#   FUZZ_SECONDS=900 bench/fuzz.sh        # each target until 10000000 or 15 minutes, what comes first
#
# Knobs (environment): FUZZ_BUILD_DIR (build-fuzz), FUZZ_CXX (clang++-14), FUZZ_SECONDS (no limit).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
execs=${1:-10000000}
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
cxx=${FUZZ_CXX:-clang++-14}
targets=(fuzz_go_flags fuzz_duration fuzz_holder_record fuzz_prefix fuzz_consul_reply fuzz_etcd_reply
         fuzz_etcd_stream fuzz_etcd_watch fuzz_http_response fuzz_zk_layout fuzz_state_files
         fuzz_metrics_file fuzz_pg_record fuzz_pg_locks)
if (($# > 1)); then
  shift
  for t; do
    [[ " ${targets[*]} " == *" $t "* ]] || { echo "bench/fuzz.sh: no target $t (${targets[*]})" >&2; exit 2; }
  done
  targets=("$@")
fi

if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$root/tests/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" -j "$(nproc)" >/dev/null

work=$(mktemp -d "${TMPDIR:-/tmp}/lock-fuzz-bench.XXXXXX")
keep=0
# Kept only when it holds a reproducer.
cleanup() { if [[ $keep == 0 ]]; then rm -rf -- "$work"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== Machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
printf '%-20s %12s %9s %8s %8s\n' target executions exec/s corpus crashes
for t in "${targets[@]}"; do
  mkdir -p "$work/$t/corpus" "$work/$t/crashes"
  # The seeds, but not the reproducers of bugs already known (bug-*): those would end the run
  # before it starts. A new crash ends this target's run and is counted.
  for seed in "$root/tests/fuzz/corpus/$t"/*; do
    case ${seed##*/} in bug-*) ;; *) cp -- "$seed" "$work/$t/corpus/" ;; esac
  done
  args=(-runs="$execs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
        -artifact_prefix="$work/$t/crashes/")
  if [[ -n ${FUZZ_SECONDS:-} ]]; then args+=(-max_total_time="$FUZZ_SECONDS"); fi
  if [[ -f $root/tests/fuzz/$t.dict ]]; then args+=(-dict="$root/tests/fuzz/$t.dict"); fi
  # One process per target, one after the other: exec/s stays comparable between targets and
  # runs, and a second core is left to whatever else the machine does.
  start=$(date +%s.%N)
  "$build/$t" "${args[@]}" "$work/$t/corpus" >"$work/$t/log" 2>&1 || true
  end=$(date +%s.%N)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log")
  # libFuzzer's own average is in whole seconds; time the run instead.
  rate=$(awk -v n="${runs:-0}" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", n / (b - a) }')
  corpus=$(find "$work/$t/corpus" -type f | wc -l)
  crashes=$(find "$work/$t/crashes" -type f | wc -l)
  printf '%-20s %12s %9s %8s %8s\n' "$t" "${runs:-?}" "${rate:-?}" "$corpus" "$crashes"
  if [[ $crashes != 0 ]]; then
    keep=1
    find "$work/$t/crashes" -type f -printf '  reproducer: %p\n'
  fi
done
