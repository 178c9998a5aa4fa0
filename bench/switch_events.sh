#!/usr/bin/env bash
# Whether a switch between two threads of one process costs more with more perf events in their
# contexts: bench/pingpong.c (N round trips, 2N switches) pinned to CPU 0, natively and under
# bench/switch_events.c with 1, 3 and 16 inherited task clocks (one sampling at 1 kHz, the
# others counting), ROUNDS rounds of the configurations in turn. The program's own CPU (its
# getrusage), medians and paired per-round differences (bench/paired.py). record's default has
# 3 events a CPU in each thread's context, perf record 1 (docs/benchmarks.md, "The switching
# threads' tie").
# Usage: bench/switch_events.sh [ROUNDS] [N]  (defaults: 12, 100000)
set -euo pipefail
ROUNDS=${1:-12}
N=${2:-100000}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
cc -O2 -Wall -pthread "$here/pingpong.c" -o "$dir/pingpong"
cc -O2 -Wall "$here/switch_events.c" -o "$dir/switch_events"
run=(taskset -c 0 "$dir/pingpong" "$N")
cpu() { awk '/^cpu_ms/ {print $2}'; }
for ((r = 0; r < ROUNDS; r++)); do
  echo "native $("${run[@]}" | cpu)"
  for e in 1 3 16; do echo "events$e $("$dir/switch_events" "$e" "${run[@]}" | cpu)"; done
done >"$dir/rows"
echo "pingpong $N (2x$N switches on CPU 0), $ROUNDS rounds in turn; process CPU, ms"
python3 "$here/paired.py" "$dir/rows" 1 ms events3-events1 events16-events1 events1-native
