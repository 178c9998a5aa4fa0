#!/usr/bin/env bash
# What sampling costs a program whose threads switch often: bench/pingpong.c (two threads
# passing a byte through pipes, N round trips: 2N switches), pinned to CPU 0 with taskset (the
# kernel swaps the two threads' cloned perf contexts at a switch on one CPU instead of stopping
# and starting their events, unless an event forbids it), ROUNDS rounds of the configurations
# in turn: natively, under perf record -e task-clock $PERF_SCOPE, under `sprofil record` (its
# default: sampling from outside, src/record/agentless.cpp) and `sprofil record --agent`, all
# at HZ. The program's own CPU (its getrusage), medians and paired per-round differences
# (bench/paired.py).
# Usage: bench/switch_cost.sh [BUILD_DIR] [ROUNDS] [N] [HZ]  (defaults: build-compare, 8, 100000, 1000)
set -euo pipefail
BUILD=${1:-build-compare}
ROUNDS=${2:-8}
N=${3:-100000}
HZ=${4:-1000}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
compare_build "$BUILD"
cc -O2 -Wall -pthread "$here/pingpong.c" -o "$dir/pingpong"
run=(taskset -c 0 "$dir/pingpong" "$N")
cpu() { awk '/^cpu_ms/ {print $2}'; }
for ((r = 0; r < ROUNDS; r++)); do
  echo "native $("${run[@]}" | cpu)"
  echo "perf $(perf record -q -e task-clock "${PERF_SCOPE[@]}" -F "$HZ" -o "$dir/p.data" -- "${run[@]}" 2>/dev/null | cpu)"
  echo "sprofil $("$TOOL" record -q -F "$HZ" -o "$dir/p.sprof" -- "${run[@]}" | cpu)"
  echo "agent $("$TOOL" record --agent -q -F "$HZ" -o "$dir/p.sprof" -- "${run[@]}" | cpu)"
done >"$dir/rows"
echo "pingpong $N (2x$N switches on CPU 0) at $HZ Hz, $ROUNDS rounds in turn; process CPU, ms"
python3 "$here/paired.py" "$dir/rows" 1 ms sprofil-perf agent-perf perf-native sprofil-native
