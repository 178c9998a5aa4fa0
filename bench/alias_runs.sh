#!/usr/bin/env bash
# Single runs of tests/clock's alias workload (two functions alternating every HALF us of
# thread CPU time, in step with a 1 kHz period by construction) under `sprofil record -F 1000`
# (record's default): |a - b| / (a + b) of each run, where 0 is due, then the median and the
# worst. RECORD_FLAGS (env) adds flags to record (e.g. --agent).
# Usage: bench/alias_runs.sh [BUILD_DIR] [HALF_US] [SECONDS] [RUNS]  (defaults: build, 500, 1, 30)
set -euo pipefail
BUILD=${1:-build}
HALF=${2:-500}
SECS=${3:-1}
RUNS=${4:-30}
TOOL=$BUILD/bin/sprofil
PROG=${ALIAS_WORKLOAD:-build/bin/alias_workload}
[ -x "$TOOL" ] && [ -x "$PROG" ] || { echo "build sprofil_tool and alias_workload first" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for ((i = 0; i < RUNS; i++)); do
  # shellcheck disable=SC2086
  "$TOOL" record -q -F 1000 ${RECORD_FLAGS:-} -o "$dir/al.sprof" -- "$PROG" "$HALF" "$SECS" 2>/dev/null
  "$TOOL" report --format json "$dir/al.sprof" | python3 -c '
import json, sys
r = {x["name"]: x["samples"] for x in json.load(sys.stdin)["rows"]}
a, b = r.get("func_a", 0), r.get("func_b", 0)
print(f"{abs(a - b) / max(a + b, 1):.3f} {a:.0f} {b:.0f}")'
done >"$dir/runs"
cat "$dir/runs"
sort -n "$dir/runs" | awk '{v[NR] = $1} END {printf "%d runs: median %s, worst %s\n", NR, v[int((NR + 1) / 2)], v[NR]}'
