#!/usr/bin/env bash
# What one of the record parent's period re-draws (PERF_EVENT_IOC_PERIOD on a running thread's
# event: an IPI of its CPU) costs that thread: bench/redraw_ipi.c, ROUNDS rounds of a run
# without re-draws and one with COUNT of them, in turn; the burning thread's CPU time. Prints
# the median per-round difference (bench/paired.py) and that difference per re-draw.
# Usage: bench/redraw_ipi.sh [ROUNDS] [COUNT] [ITERS]   (defaults: 8, 8000, 1000000000)
set -euo pipefail
ROUNDS=${1:-8}
COUNT=${2:-8000}
ITERS=${3:-1000000000}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
cc -O2 -pthread "$here/redraw_ipi.c" -o "$dir/redraw_ipi"
sent=()
for ((r = 0; r < ROUNDS; r++)); do
  echo "none $("$dir/redraw_ipi" 0 "$ITERS" | awk '{print $4}')"
  out=$("$dir/redraw_ipi" "$COUNT" "$ITERS")
  sent+=("$(echo "$out" | awk '{print $2}')")
  echo "redraw $(echo "$out" | awk '{print $4}')"
done >"$dir/rows"
python3 "$here/paired.py" "$dir/rows" 1 ms redraw-none | tee "$dir/summary"
n=$(printf '%s\n' "${sent[@]}" | median)
diff=$(sed -n 's/^redraw - none: median of the per-round differences \([-+0-9.]*\) ms.*/\1/p' "$dir/summary")
awk -v d="$diff" -v n="$n" 'BEGIN { printf "re-draws per run (median) %d: %.1f us of the thread'"'"'s CPU each\n", n, d * 1000 / n }'
