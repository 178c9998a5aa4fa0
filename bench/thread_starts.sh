#!/usr/bin/env bash
# What starting threads costs the profiled program: bench/thread_churn.c (THREADS short threads
# in turn) natively and under each of MODES at HZ, ROUNDS rounds in turn, each the median of
# RUNS runs of its process CPU (bench/process_cpu.py: the program's own user + system time, not
# the tool's). MODES (default "native drain perf"): native; drain, `sprofil record --agent`;
# outside, record's default (each thread inherits three events a CPU: two sets of task clocks
# and the tracking event); oneset, record's default with SPROFIL_JITTER=0 (no second set: two
# a CPU); perf, `perf record -e task-clock $PERF_SCOPE` (one a CPU).
# Usage: [MODES="..."] bench/thread_starts.sh [BUILD_DIR] [HZ] [THREADS] [ROUNDS] [RUNS]
#        (defaults: build, 1000, 100, 3, 5)
set -euo pipefail
BUILD=${1:-build}
HZ=${2:-1000}
THREADS=${3:-100}
ROUNDS=${4:-3}
RUNS=${5:-5}
here=$(cd "$(dirname "$0")" && pwd)
TOOL=$BUILD/bin/sprofil
[ -x "$TOOL" ] || { echo "build sprofil_tool first" >&2; exit 2; }
source "$here/common.sh"
cc -O2 -pthread "$here/thread_churn.c" -o "$dir/thread_churn"
pc=("$PY" "$here/process_cpu.py")
prog=("$dir/thread_churn" "$THREADS")
echo "thread_churn $THREADS at $HZ Hz, $ROUNDS rounds in turn of $RUNS runs; process CPU medians"
for ((r = 0; r < ROUNDS; r++)); do
  for m in ${MODES:-native drain perf}; do
    case $m in
      native) "${pc[@]}" native "$RUNS" "${prog[@]}" ;;
      drain)
        "$TOOL" record --agent -F "$HZ" -o "$dir/p.sprof" -- \
          "${pc[@]}" sprofil-record "$RUNS" "${prog[@]}"
        ;;
      outside)
        "$TOOL" record -F "$HZ" -o "$dir/p.sprof" -- "${pc[@]}" outside "$RUNS" "${prog[@]}"
        ;;
      oneset)
        SPROFIL_JITTER=0 "$TOOL" record -F "$HZ" -o "$dir/p.sprof" -- \
          "${pc[@]}" oneset "$RUNS" "${prog[@]}"
        ;;
      perf)
        if command -v perf >/dev/null; then
          perf record -q -e task-clock "${PERF_SCOPE[@]}" -F "$HZ" -o "$dir/p.data" -- \
            "${pc[@]}" "perf-record" "$RUNS" "${prog[@]}"
        fi
        ;;
      *) echo "unknown mode $m" >&2; exit 2 ;;
    esac
  done
done 2>&1 | grep -E "^(native|sprofil-record|outside|oneset|perf-record) "
