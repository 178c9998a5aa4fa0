#!/usr/bin/env bash
# Short threads that all run the same work from their start (bench/thread_phase.c: N threads
# in turn, each fa, fb, fc, fd for Q ms apiece, three times over): natively each function has a
# quarter of the threads' time. Prints each function's share of the four under record's default
# (sampled from outside), `sprofil record --agent` and `perf record -e task-clock`, ROUNDS runs
# each at 1 kHz. Under a sampler whose first sample of each thread comes at one fixed period
# after its start (an inherited perf event's copy keeps the period it was cloned with, and its
# first overflow comes one whole period in) every thread's samples fall at the same points of
# its work, and the shares are those points', not the time's.
# Usage: bench/thread_phase.sh [BUILD_DIR] [N] [Q_MS] [ROUNDS]
#        (defaults: build-compare, 400, 0.25, 3)
set -euo pipefail
BUILD=${1:-build-compare}
N=${2:-400}
Q=${3:-0.25}
ROUNDS=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
compare_build "$BUILD"
cc -O1 -g -pthread -Wall "$here/thread_phase.c" -o "$dir/thread_phase"
prog=("$dir/thread_phase" "$N" "$Q")
# The four functions' shares of their sum, from `sprofil report --format json`.
shares_sprof() {
  "$TOOL" report --format json "$1" | python3 -c '
import json, sys
rows = {r["name"]: r["samples"] for r in json.load(sys.stdin)["rows"]
        if r["name"] in ("fa", "fb", "fc", "fd")}
total = sum(rows.values()) or 1
print(" ".join(f"{f} {100 * rows.get(f, 0) / total:5.1f}%" for f in ("fa", "fb", "fc", "fd")))'
}
shares_perf() {
  perf report -i "$1" --stdio --sort symbol 2>/dev/null | python3 -c '
import re, sys
rows = {}
for line in sys.stdin:
    m = re.match(r"\s*([0-9.]+)%\s+\[\.\]\s+(f[abcd])\s", line)
    if m:
        rows[m.group(2)] = float(m.group(1))
total = sum(rows.values()) or 1
print(" ".join(f"{f} {100 * rows.get(f, 0) / total:5.1f}%" for f in ("fa", "fb", "fc", "fd")))'
}
echo "thread_phase $N $Q at 1 kHz: each function's share of the four (natively 25% each)"
for ((r = 1; r <= ROUNDS; r++)); do
  "$TOOL" record -q -F 1000 -o "$dir/d.sprof" -- "${prog[@]}"
  echo "record's default, run $r: $(shares_sprof "$dir/d.sprof")"
  "$TOOL" record -q --agent -F 1000 -o "$dir/a.sprof" -- "${prog[@]}"
  echo "record --agent,   run $r: $(shares_sprof "$dir/a.sprof")"
  perf record -q -F 1000 -e task-clock -o "$dir/p.data" -- "${prog[@]}" 2>/dev/null
  echo "perf record,      run $r: $(shares_perf "$dir/p.data")"
done
