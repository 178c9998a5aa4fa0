#!/usr/bin/env bash
# Single runs of tests/clock's alias workload (two functions alternating every HALF us of
# thread CPU time, in step with a 1 kHz period by construction) under `sprofil record -F 1000`
# (record's default): |a - b| / (a + b) of each run, where 0 is due, then the median, the 90th
# percentile, the worst and the runs over 0.1. RECORD_FLAGS (env) adds flags to record (e.g.
# --agent). With BASE_BUILD=DIR (another build of sprofil, e.g. of an earlier commit) each run
# is made with both builds in turn, and each build's figures are printed.
# Usage: [BASE_BUILD=DIR] bench/alias_runs.sh [BUILD_DIR] [HALF_US] [SECONDS] [RUNS]
#        (defaults: build, 500, 1, 30)
set -euo pipefail
BUILD=${1:-build}
HALF=${2:-500}
SECS=${3:-1}
RUNS=${4:-30}
PROG=${ALIAS_WORKLOAD:-build/bin/alias_workload}
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
builds_in_turn "$BUILD"
[ -x "$PROG" ] || { echo "build alias_workload first (or set ALIAS_WORKLOAD)" >&2; exit 2; }
for ((i = 0; i < RUNS; i++)); do
  for ((k = 0; k < ${#builds[@]}; k += 2)); do
    tool=${builds[k + 1]}/bin/sprofil
    # shellcheck disable=SC2086
    "$tool" record -q -F 1000 ${RECORD_FLAGS:-} -o "$dir/al.sprof" -- "$PROG" "$HALF" "$SECS" \
      >/dev/null 2>&1
    "$tool" report --format json "$dir/al.sprof" | python3 -c '
import json, sys
r = {x["name"]: x["samples"] for x in json.load(sys.stdin)["rows"]}
a, b = r.get("func_a", 0), r.get("func_b", 0)
print(sys.argv[1], f"{abs(a - b) / max(a + b, 1):.3f} {a:.0f} {b:.0f}")' "${builds[k]}"
  done
done >"$dir/runs"
cat "$dir/runs"
python3 - "$dir/runs" <<'EOF'
import sys
rows = [line.split() for line in open(sys.argv[1])]
for name in dict.fromkeys(r[0] for r in rows):
    v = sorted(float(r[1]) for r in rows if r[0] == name)
    n = len(v)
    print(f"{name}: {n} runs: median {v[(n - 1) // 2]:.3f}, 90th {v[int(0.9 * (n - 1))]:.3f}, "
          f"worst {v[-1]:.3f}, over 0.1: {sum(x > 0.1 for x in v)}")
EOF
