#!/usr/bin/env bash
# Many holders at once on the local backend, beside flock(1) holding as many files of its own:
# how long until all hold, what each costs the machine while it holds (CPU, which for lock is its
# loss watch, a path check every 5 s; memory, kernel's share included; descriptors of one
# holding process), and how long until all have let go. Prints both and their ratios.
#
#   bench/local_holders.sh                  # 10000 holders, build/lock
#   BENCH_HOLDERS=1000 LOCK_BIN=/path/to/lock bench/local_holders.sh
#
# Knobs (environment): BENCH_HOLDERS (10000), BENCH_IDLE (seconds over which idle CPU is
# measured, 20). Each lock holder is three processes (lock, its watchdog, the child), each flock
# holder two: 10000 of them need kernel.pid_max above 31000.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
lock_bin=${LOCK_BIN:-$root/build/lock}
case $lock_bin in /*) ;; *) lock_bin=$PWD/$lock_bin ;; esac
holders=${BENCH_HOLDERS:-10000}
idle=${BENCH_IDLE:-20}
for tool in "$lock_bin" "$(command -v flock || true)"; do
  if [[ -z $tool || ! -x $tool ]]; then
    echo "local_holders.sh: needs $lock_bin and flock (util-linux)" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/lock-holders.XXXXXX")
pids=()
cleanup() {
  ((${#pids[@]})) && kill -KILL "${pids[@]}" 2>/dev/null
  rm -rf -- "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== Machine"
echo "   nproc:   $(nproc)"
echo "   kernel:  $(uname -srm)"
echo "   pid_max: $(cat /proc/sys/kernel/pid_max)"
echo "   lock:    $("$lock_bin" -version) ($lock_bin)"
echo "   flock:   $(flock --version 2>&1 | head -n1)"
echo "   state:   $work ($(df -PT "$work" | awk 'NR == 2 { print $2 }') file system)"
echo

busy_ticks() { awk '/^cpu / { printf "%.0f\n", $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
available_kb() { awk '/^MemAvailable:/ { print $2 }' /proc/meminfo; }
now() { date +%s.%N; }
# Polls (no sleep-and-hope): until the file has $2 lines, at most 600 s.
wait_lines() {
  local deadline=$((SECONDS + 600))
  while (($(wc -l < "$1" 2>/dev/null || echo 0) < $2)); do
    ((SECONDS < deadline)) || { echo "local_holders.sh: only $(wc -l < "$1") of $2 hold" >&2; exit 1; }
    sleep 0.2
  done
}

# One tool: $1 names it, the rest is the command for holder $i with {} for its number.
measure() {
  local name=$1 dir=$work/$1
  shift
  mkdir -p "$dir"
  mkfifo "$dir/gate"
  local before_ticks before_kb start held_at
  before_ticks=$(busy_ticks)
  sleep "$idle"  # the measurement window itself
  local base_ticks=$(($(busy_ticks) - before_ticks))
  before_kb=$(available_kb)
  start=$(now)
  pids=()
  for ((i = 0; i < holders; i++)); do
    "${@//\{\}/$i}" sh -c "echo >> $dir/held; exec cat $dir/gate" 2>> "$dir/errors" &
    pids+=($!)
  done
  wait_lines "$dir/held" "$holders"
  held_at=$(now)
  local fds
  fds=$(ls "/proc/${pids[0]}/fd" | wc -l)
  local used_kb=$((before_kb - $(available_kb)))
  before_ticks=$(busy_ticks)
  sleep "$idle"  # the measurement window itself
  local hold_ticks=$(($(busy_ticks) - before_ticks))
  local released_at
  : > "$dir/gate"
  local failed=0
  for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
  pids=()
  released_at=$(now)
  if [[ -s $dir/errors || $failed != 0 ]]; then
    echo "local_holders.sh: $name: $failed runs failed: $(head -c 500 "$dir/errors")" >&2
    exit 1
  fi
  local hz
  hz=$(getconf CLK_TCK)
  # CPU per holder in microseconds per second of holding, above the machine's own idle load.
  awk -v n="$name" -v h="$holders" -v s="$start" -v a="$held_at" -v r="$released_at" \
      -v t="$hold_ticks" -v b="$base_ticks" -v hz="$hz" -v w="$idle" -v kb="$used_kb" -v f="$fds" \
      'BEGIN { cpu = (t - b) / hz / w / h * 1e6; if (cpu < 0) cpu = 0
               printf "%s %.1f %.1f %.0f %d %.1f\n", n, a - s, cpu, kb / h, f, (r - a) }'
}

echo "== $holders holders at once, each holding until released together (idle CPU over ${idle} s)"
LOCK_STATE_DIR=$work/lock-state measure lock "$lock_bin" -shell=false "p{}" > "$work/rows"
measure flock flock "$work/flock.{}" >> "$work/rows"
python3 - "$work/rows" <<'EOF'
import sys
rows = [line.split() for line in open(sys.argv[1])]
head = ["tool", "all hold (s)", "CPU per holder (us/s)", "memory per holder (KB)",
        "descriptors", "all let go (s)"]
table = [head] + rows
lock, flock = ([float(x) for x in r[1:]] for r in rows)
table.append(["lock/flock"] + [f"{a / b:.2f}x" if b else "-" for a, b in zip(lock, flock)])
widths = [max(len(r[i]) for r in table) for i in range(len(head))]
for r in table:
    print("   " + "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
EOF
echo
echo "CPU: the machine's busy time while all hold, less its busy time just before they started,"
echo "per holder; memory: the drop in MemAvailable, per holder; descriptors: one holding process"
echo "(lock itself; flock)."
