#!/usr/bin/env bash
# The size of what `sprofil record` writes, and what writing and reading it costs: a run of
# N short awk programs (a loop of about 20 ms: each takes samples, so each is a process image
# stored in the run profile) started by bash, recorded ROUNDS times. Prints the medians of the output's apparent size
# (ls -l), its disk usage (stat's blocks), the whole record's wall time (the same loop's native
# wall time is printed beside it) and `sprofil report`'s wall time on the output. With
# BASE_BUILD=DIR, the same for that build's tool in the same rounds (an A/B, e.g. against a
# commit before a format change).
# Usage: [BASE_BUILD=DIR] bench/run_size.sh [BUILD_DIR] [N] [ROUNDS]   (defaults: build, 100, 5)
set -euo pipefail
BUILD=${1:-build}
N=${2:-100}
ROUNDS=${3:-5}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
BUILD=$(cd "$BUILD" && pwd)
[ -x "$BUILD/bin/sprofil" ] || {
  echo "build sprofil_tool in $BUILD first" >&2
  exit 2
}
printf 'for i in $(seq %d); do awk '"'"'BEGIN { for (i = 0; i < 300000; i++) s += i }'"'"'; done\n' \
  "$N" >"$dir/loop.sh"
builds=(new)
[ -n "${BASE_BUILD:-}" ] && builds+=(base)
declare -A apparent disk wall report
native=""
for ((r = 0; r < ROUNDS; r++)); do
  /usr/bin/time -f '%e' -o "$dir/t" bash "$dir/loop.sh" >/dev/null 2>&1
  native+="$(cat "$dir/t") "
  for b in "${builds[@]}"; do
    tool=$BUILD/bin/sprofil
    [ "$b" = base ] && tool=$BASE_BUILD/bin/sprofil
    rm -f "$dir/p.sprof"
    /usr/bin/time -f '%e' -o "$dir/t" "$tool" record -o "$dir/p.sprof" -- bash "$dir/loop.sh" \
      >/dev/null 2>&1
    wall[$b]+="$(cat "$dir/t") "
    apparent[$b]+="$(stat -c %s "$dir/p.sprof") "
    disk[$b]+="$(($(stat -c %b "$dir/p.sprof") * $(stat -c %B "$dir/p.sprof"))) "
    /usr/bin/time -f '%e' -o "$dir/t" "$tool" report "$dir/p.sprof" >/dev/null 2>&1
    report[$b]+="$(cat "$dir/t") "
  done
done
n_med=$(echo "$native" | median)
echo "bash loop of $N short awk programs, $ROUNDS rounds; medians (native wall ${n_med} s)"
printf '%-6s %16s %12s %14s %12s\n' build "apparent bytes" "disk bytes" "record wall s" "report s"
for b in "${builds[@]}"; do
  printf '%-6s %16s %12s %14s %12s\n' "$b" "$(echo "${apparent[$b]}" | median)" \
    "$(echo "${disk[$b]}" | median)" "$(echo "${wall[$b]}" | median)" \
    "$(echo "${report[$b]}" | median)"
done
