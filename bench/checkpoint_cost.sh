#!/usr/bin/env bash
# What record's checkpoints cost (`--checkpoint`: sampling from outside, the run profile written
# to the output every C seconds while the command runs; src/record/record.cpp): cmp-burn4 for
# SECONDS under `sprofil record` with `--checkpoint 0` (written at the end only) and with
# `--checkpoint C`, ROUNDS rounds in turn. The whole tree's CPU (wait4: record and the program),
# medians and the paired per-round difference (bench/paired.py); about SECONDS / C writes a run.
# Usage: bench/checkpoint_cost.sh [BUILD_DIR] [ROUNDS] [SECONDS] [C]
#        (defaults: build-compare, 8, 4, 0.2)
set -euo pipefail
BUILD=${1:-build-compare}
ROUNDS=${2:-8}
SECS=${3:-4}
C=${4:-0.2}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
compare_build "$BUILD"
N=1
for ((r = 0; r < ROUNDS; r++)); do
  tree off "$TOOL" record -q --checkpoint 0 -o "$dir/p.sprof" -- "$PROG" --seconds "$SECS"
  tree on "$TOOL" record -q --checkpoint "$C" -o "$dir/p.sprof" -- "$PROG" --seconds "$SECS"
done 3>"$dir/rows" >/dev/null
echo "cmp-burn4 --seconds $SECS under sprofil record, --checkpoint 0 (off) and $C (on), $ROUNDS rounds in turn; tree CPU, ms"
python3 "$here/paired.py" "$dir/rows" 1 ms on-off
