#!/usr/bin/env bash
# What starting threads costs the profiled program: bench/thread_churn.c (THREADS short threads
# in turn) natively, under `sprofil record` (drain mode) and `perf record -e task-clock
# --all-user` at HZ, ROUNDS rounds in turn, each the median of RUNS runs of its process CPU
# (bench/process_cpu.py: the program's own user + system time, not the tool's).
# Usage: bench/thread_starts.sh [BUILD_DIR] [HZ] [THREADS] [ROUNDS] [RUNS]
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
  "${pc[@]}" native "$RUNS" "${prog[@]}"
  "$TOOL" record --agent -F "$HZ" -o "$dir/p.sprof" -- "${pc[@]}" sprofil-record "$RUNS" "${prog[@]}"
  if command -v perf >/dev/null; then
    perf record -q -e task-clock --all-user -F "$HZ" -o "$dir/p.data" -- \
      "${pc[@]}" "perf-record" "$RUNS" "${prog[@]}"
  fi
done 2>&1 | grep -E "^(native|sprofil-record|perf-record) "
