#!/usr/bin/env bash
# The cost per process of profiling a process tree: a bash loop that runs /bin/true N times
# (fork, exec, exit: what a build or a shell script does thousands of times), natively, under
# `sprofil record` (its default clock) and under `perf record -F 1000` when perf events are
# allowed, ROUNDS times in turn. Prints the medians of wall time and of the whole tree's CPU
# (user + system of the tool and every child, /usr/bin/time), and each profiler's extra CPU
# per process over native. With BASE_BUILD=DIR (another build, e.g. of an earlier commit), each
# round also runs that build's `sprofil record` ("base"): an A/B of a change within the rounds.
# Usage: [BASE_BUILD=DIR] bench/process_loop.sh [BUILD_DIR] [N] [ROUNDS]
#        (defaults: build, 500, 5)
set -euo pipefail
BUILD=${1:-build}
N=${2:-500}
ROUNDS=${3:-5}
TOOL=$BUILD/bin/sprofil
[ -x "$TOOL" ] || { echo "build sprofil_tool first" >&2; exit 2; }
source "$(dirname "$0")/common.sh"
printf 'for i in $(seq %d); do /bin/true; done\n' "$N" >"$dir/loop.sh"
runs=(native sprofil)
[ -n "${BASE_BUILD:-}" ] && runs+=(base)
perf_cmd=()
if command -v perf >/dev/null && perf record -q -F 1000 -o "$dir/probe.data" -- true 2>/dev/null; then
  runs+=(perf)
  perf_cmd=(perf record -q -F 1000 -o "$dir/perf.data" --)
fi
declare -A wall cpu
for ((r = 0; r < ROUNDS; r++)); do
  for run in "${runs[@]}"; do
    case $run in
      native) cmd=(bash "$dir/loop.sh") ;;
      sprofil) cmd=("$TOOL" record -o "$dir/p.sprof" -- bash "$dir/loop.sh") ;;
      base) cmd=("$BASE_BUILD/bin/sprofil" record -o "$dir/p.sprof" -- bash "$dir/loop.sh") ;;
      perf) cmd=("${perf_cmd[@]}" bash "$dir/loop.sh") ;;
    esac
    /usr/bin/time -f '%e %U %S' -o "$dir/t" "${cmd[@]}" >/dev/null 2>&1
    read -r e u s <"$dir/t"
    wall[$run]+="$e "
    cpu[$run]+="$(echo "$u + $s" | bc) "
  done
done
echo "bash loop of $N /bin/true, $ROUNDS rounds in turn; medians"
printf '%-8s %10s %12s %22s\n' run "wall s" "tree CPU s" "extra CPU ms/process"
base=$(echo "${cpu[native]}" | median)
for run in "${runs[@]}"; do
  w=$(echo "${wall[$run]}" | median)
  c=$(echo "${cpu[$run]}" | median)
  printf '%-8s %10.3f %12.3f %22.2f\n' "$run" "$w" "$c" "$(echo "($c - $base) * 1000 / $N" | bc -l)"
done
