#!/bin/sh
# Runs every libFuzzer target found in BUILD_DIR over its seed corpus (tests/fuzz/corpus/<target>,
# which keeps the reproducers of bugs found so far), then for SECONDS more on new inputs.
#
#   tests/fuzz/run.sh BUILD_DIR [SECONDS]     # SECONDS per target, default 10; 0: seeds only
#
# New inputs and reproducers go to a scratch directory, never into the source tree. Exits 0 when
# no target failed; 1 when one did, naming it and the reproducer (the scratch directory is kept);
# 77, CTest's code for a skipped test, when BUILD_DIR holds no fuzz targets (they need clang).
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BUILD_DIR [SECONDS]" >&2
  exit 2
fi
build=$1
seconds=${2:-10}
here=$(cd "$(dirname "$0")" && pwd)
targets="fuzz_go_flags fuzz_duration fuzz_holder_record fuzz_prefix fuzz_consul_reply fuzz_etcd_reply
         fuzz_etcd_stream fuzz_etcd_watch fuzz_http_response fuzz_zk_layout fuzz_state_files fuzz_metrics_file
         fuzz_pg_record fuzz_pg_locks"

found=""
for t in $targets; do
  if [ -x "$build/$t" ]; then found="$found $t"; fi
done
if [ -z "$found" ]; then
  echo "run.sh: no fuzz targets in $build; skipped (build them as tests/fuzz/CMakeLists.txt says)" >&2
  exit 77
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/lock-fuzz.XXXXXX")
keep=0
# The scratch directory goes, unless it holds a reproducer someone has to look at.
trap 'if [ "$keep" = 0 ]; then rm -rf -- "$scratch"; fi' EXIT
trap 'exit 130' INT TERM

# -max_total_time=0 would mean "no limit": with 0 seconds, run the seeds and stop.
if [ "$seconds" = 0 ]; then limit=-runs=0; else limit=-max_total_time=$seconds; fi

failed=0
for t in $found; do
  mkdir -p "$scratch/$t/corpus" "$scratch/$t/crashes"
  set -- "$limit" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$scratch/$t/crashes/"
  if [ -f "$here/$t.dict" ]; then set -- "$@" -dict="$here/$t.dict"; fi
  # The first directory receives what the fuzzer finds; the seeds are only read.
  if "$build/$t" "$@" "$scratch/$t/corpus" "$here/corpus/$t" >"$scratch/$t/log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$t/log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$scratch/$t/log")
    if [ "$seconds" = 0 ]; then rate=""; else rate=", ${rate:-?} exec/s"; fi
    echo "$t: ok, ${runs:-?} inputs$rate"
    continue
  fi
  failed=1
  keep=1
  echo "$t: FAILED"
  # What broke: the invariant or sanitizer report, and libFuzzer's summary.
  grep -E 'invariant broken|^  [^ ]|runtime error|ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|^SUMMARY' \
    "$scratch/$t/log" | head -n 8 | sed 's/^/  | /'
  for r in "$scratch/$t/crashes"/*; do
    [ -e "$r" ] || continue
    echo "  reproducer: $r"
    for seed in "$here/corpus/$t"/*; do
      if cmp -s "$r" "$seed"; then echo "  (the seed ${seed#"$here"/})"; fi
    done
    echo "  rerun:      $build/$t $r"
  done
  echo "  full log:   $scratch/$t/log"
done
exit "$failed"
