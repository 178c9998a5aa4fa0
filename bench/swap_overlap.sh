#!/usr/bin/env bash
# What record's default swaps cost a command of many threads: agent_prog's churn (64 threads
# started at once, each burning 40 ms of CPU, then 0.05 s in the main thread: 2.6 s of CPU) under
# `sprofil record --agentless -F 10000` with SPROFIL_DRAIN_STATS=1. Each run prints the samples of the set that
# was off (taken while both sets sampled during a swap, then dropped: what the overlap costs
# the command), the swaps and the longest one's wall time, the command's CPU and the part of
# it without a sample; then, for each build, the median and mean of the overlap's samples, the
# median CPU, the runs whose CPU without a sample exceeded 0.05 s (the usual is about
# 0.013 s of 2.64 s) and those where a full ring dropped records. With BASE_BUILD=DIR (another build of sprofil, e.g. of an earlier
# commit) each round runs both builds in turn.
# Usage: [BASE_BUILD=DIR] bench/swap_overlap.sh [BUILD_DIR] [ROUNDS]   (defaults: build, 30)
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-30}
PROG=${AGENT_PROG:-build/bin/agent_prog}
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
builds_in_turn "$BUILD"
[ -x "$PROG" ] || { echo "build agent_prog first (or set AGENT_PROG)" >&2; exit 2; }
for ((i = 0; i < ROUNDS; i++)); do
  for ((k = 0; k < ${#builds[@]}; k += 2)); do
    SPROFIL_DRAIN_STATS=1 "${builds[k + 1]}/bin/sprofil" record --agentless -F 10000 \
      -o "$dir/run.sprof" -- "$PROG" --truth "$dir/truth" churn 64 40000 64 0.05 \
      >/dev/null 2>"$dir/err" || true
    python3 - "${builds[k]}" "$dir/err" <<'EOF'
import re, sys
t = open(sys.argv[2]).read()
def num(pattern):
    m = re.search(pattern, t)
    return m.group(1) if m else "nan"
print(sys.argv[1], num(r"(\d+) of the set that was off"), num(r"(\d+) swaps of"),
      num(r"the longest ([\d.]+) ms"), num(r"the run's ([\d.]+) s CPU"),
      num(r"; ([\d.]+) s of the run's"), num(r"(\d+) records dropped by the kernel"))
EOF
  done
done >"$dir/runs"
echo "build off swaps longest_ms cpu_s unsampled_s dropped"
cat "$dir/runs"
python3 - "$dir/runs" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for name in dict.fromkeys(r[0] for r in rows):
    mine = [r for r in rows if r[0] == name]
    off = [float(r[1]) for r in mine]
    cpu = [float(r[4]) for r in mine]
    uns = [float(r[5]) for r in mine]
    print(f"{name}: {len(mine)} runs: set that was off median {statistics.median(off):.0f} "
          f"mean {statistics.mean(off):.0f}; swaps median "
          f"{statistics.median(float(r[2]) for r in mine):.0f}; CPU median "
          f"{statistics.median(cpu):.3f} s; without a sample median {statistics.median(uns):.3f} s, "
          f"most {max(uns):.3f} s, runs over 0.05 s: {sum(u > 0.05 for u in uns)}; runs with "
          f"records dropped by a full ring: {sum(float(r[6]) > 0 for r in mine)}")
EOF
