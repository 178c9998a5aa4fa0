#!/usr/bin/env bash
# A live snapshot of a large program sampled from outside (`sprofil record --live`, record's
# default): cc1plus compiling tools/sprofil/gperf.cpp (preprocessed once; CLI11 headers, about
# 4 s of CPU at -O2 here). For each of N repetitions, a fresh compile; 1 s in, SNAPS snapshots
# half a second apart, each: the answer's bytes and the wall time of the exchange (a raw request on
# the socket, bench/live_snapshot.py: record's making of the image and its transfer), and the
# wall time of `sprofil fetch PID -o FILE` (the tool's start-up, the exchange, the parse and the
# write). With BASE_BUILD=DIR the same with that build's tool ("base"), the two in alternating
# order, each repetition with a compile of its own. Prints each snapshot, then the medians and
# the ratios to base. Not a test: CI never runs it.
# Usage: [BASE_BUILD=DIR] bench/live_snapshot.sh [BUILD_DIR] [N] [SNAPS]
#        (defaults: build, 5, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
N=${2:-5}
SNAPS=${3:-3}
source bench/common.sh
export XDG_RUNTIME_DIR=$dir
CC1=$(g++ -print-prog-name=cc1plus)
g++ -std=c++20 -O2 -DNDEBUG -Isrc -Iinclude -E tools/sprofil/gperf.cpp -o "$dir/big.ii"
builds=(new "$BUILD")
[ -n "${BASE_BUILD:-}" ] && builds+=(base "$BASE_BUILD")
for ((k = 1; k < ${#builds[@]}; k += 2)); do
  [ -x "${builds[k]}/bin/sprofil" ] || { echo "no ${builds[k]}/bin/sprofil" >&2; exit 2; }
done

now_ms() { date +%s%3N; }

# One repetition of build $2's tool, labelled $1: one line per snapshot.
rep() {
  local label=$1 tool=$2/bin/sprofil
  rm -rf "$dir/sprofil"
  "$tool" record --live -o "$dir/cc1.sprof" -- "$CC1" -quiet -O2 "$dir/big.ii" -o /dev/null \
    >/dev/null 2>&1 &
  local rec=$!
  pids+=("$rec")
  local pid="" sock=""
  for ((w = 0; w < 500; w++)); do
    sleep 0.01
    pid=$(pgrep -P "$rec" -x cc1plus || true)
    [ -n "$pid" ] && [ -S "$dir/sprofil/$pid.sock" ] && { sock=$dir/sprofil/$pid.sock; break; }
  done
  [ -n "$sock" ] || { echo "no socket for $label" >&2; exit 1; }
  sleep 1
  for ((s = 1; s <= SNAPS; s++)); do
    local raw t0 t1
    raw=$("$PY" bench/live_snapshot.py "$sock") || break  # the compile ended
    t0=$(now_ms)
    "$tool" fetch "$pid" -o "$dir/snap.sprof" >/dev/null 2>&1 || break
    t1=$(now_ms)
    echo "$label $raw $((t1 - t0))"
    sleep 0.5
  done
  wait "$rec" || true
}

echo "build answer_bytes exchange_ms fetch_ms"
for ((i = 1; i <= N; i++)); do
  order=(0)
  [ ${#builds[@]} -gt 2 ] && { ((i % 2)) && order=(0 2) || order=(2 0); }
  for o in "${order[@]}"; do rep "${builds[o]}" "${builds[o + 1]}"; done
done | tee "$dir/rows"
echo
echo "medians: build answer_MB exchange_ms fetch_ms"
for ((k = 0; k < ${#builds[@]}; k += 2)); do
  l=${builds[k]}
  b=$(awk -v l="$l" '$1 == l {print $2}' "$dir/rows" | median)
  e=$(awk -v l="$l" '$1 == l {print $3}' "$dir/rows" | median)
  f=$(awk -v l="$l" '$1 == l {print $4}' "$dir/rows" | median)
  echo "$l $(awk -v b="$b" 'BEGIN {printf "%.1f", b / 1e6}') $e $f" | tee -a "$dir/medians"
done
if [ ${#builds[@]} -gt 2 ]; then
  awk '{b[$1] = $2; e[$1] = $3; f[$1] = $4}
       END {printf "new / base: answer %.3fx, exchange %.3fx, fetch %.3fx\n",
            b["new"] / b["base"], e["new"] / e["base"], f["new"] / f["base"]}' "$dir/medians"
fi
