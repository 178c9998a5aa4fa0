#!/usr/bin/env bash
# Goal 1 of the default profile, interleaved: cmp-burn4's own process CPU under `sprofil record
# --agent` (drain mode), the same with SPROFIL_JITTER=0 (no period re-draws) and under `perf record -e
# task-clock $PERF_SCOPE`, at HZ, ROUNDS rounds in turn (bench/process_cpu.py: the program's
# user + system time, not the tool's). Prints each configuration's median and the median of
# the per-round differences against perf record, with a 95% confidence interval for it
# (distribution-free: the sign test's order statistics). "agentless" is `sprofil record
# --agentless`, record's default (nothing loaded into the program: record holds the events the
# command inherits, src/record/agentless.cpp), "agentless-nojitter" the same with SPROFIL_JITTER=0
# (one set of events, no swaps: what the swaps against aliasing cost is agentless - that).
# CONFIGS (env) picks configurations, in the order given (default: drain nojitter agentless perf).
# With BASE_BUILD=DIR (another build of sprofil, e.g. of an earlier commit), each round also
# runs that build's `sprofil record` ("base"): an A/B of a change within the same rounds.
# Usage: [BASE_BUILD=DIR] bench/drain_vs_perf.sh [BUILD_DIR] [HZ] [ROUNDS] [ITERS]
#        (defaults: build-compare, 10000, 12, 561600000: about 1 s of CPU here)
set -euo pipefail
BUILD=${1:-build-compare}
HZ=${2:-10000}
ROUNDS=${3:-12}
ITERS=${4:-561600000}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
compare_build "$BUILD"
pc=("$PY" "$here/process_cpu.py")
run=("$PROG" --iters "$ITERS")
read -r -a configs <<<"${CONFIGS:-drain nojitter agentless perf}"
[ -n "${BASE_BUILD:-}" ] && configs+=(base)
for ((r = 0; r < ROUNDS; r++)); do
  for c in "${configs[@]}"; do
    case $c in
      drain) "$TOOL" record --agent -F "$HZ" -o "$dir/p.sprof" -- "${pc[@]}" drain 1 "${run[@]}" ;;
      nojitter)
        SPROFIL_JITTER=0 "$TOOL" record --agent -F "$HZ" -o "$dir/p.sprof" -- \
          "${pc[@]}" nojitter 1 "${run[@]}"
        ;;
      agentless)
        "$TOOL" record --agentless -F "$HZ" -o "$dir/p.sprof" -- "${pc[@]}" agentless 1 "${run[@]}"
        ;;
      agentless-nojitter)
        SPROFIL_JITTER=0 "$TOOL" record --agentless -F "$HZ" -o "$dir/p.sprof" -- \
          "${pc[@]}" agentless-nojitter 1 "${run[@]}"
        ;;
      perf)
        perf record -q -e task-clock "${PERF_SCOPE[@]}" -F "$HZ" -o "$dir/p.data" -- \
          "${pc[@]}" perf 1 "${run[@]}"
        ;;
      base) "$BASE_BUILD/bin/sprofil" record -F "$HZ" -o "$dir/p.sprof" -- "${pc[@]}" base 1 "${run[@]}" ;;
      *) echo "unknown configuration $c" >&2; exit 2 ;;
    esac
  done
done 2>&1 | grep -E '^(drain|nojitter|agentless|agentless-nojitter|perf|base) ' >"$dir/rows"
echo "cmp-burn4 --iters $ITERS at $HZ Hz, $ROUNDS rounds in turn; process CPU, ms"
python3 "$here/paired.py" "$dir/rows" 1 ms drain-perf nojitter-perf agentless-perf \
  agentless-nojitter-perf base-perf drain-base agentless-base agentless-drain \
  agentless-agentless-nojitter
