#!/usr/bin/env bash
# A thread per small task (bench/short_tasks.cpp: 4,000 std::async tasks of about 0.5 ms, two
# at a time), at HZ: the program's CPU natively, under perf record -e task-clock $PERF_SCOPE
# at HZ and at 4 HZ (the rate record's default shortens such threads' period to), under
# record's default of BASE_BUILD (when given: before the clones' period was shortened
# after short threads) and of BUILD, and under `record --agent`, ROUNDS paired rounds
# (bench/cpu_rounds.py: medians, per-round differences with their 95% intervals); then one
# profile of each and the share of its samples at work(), where the tasks' time is (perf
# report's share for perf record).
# Usage: [BASE_BUILD=DIR] bench/short_tasks.sh [BUILD_DIR] [ROUNDS] [HZ]
#        (defaults: build-compare, 10, 1000)
set -euo pipefail
BUILD=$(cd "${1:-build-compare}" && pwd)
ROUNDS=${2:-10}
HZ=${3:-1000}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
TOOL=$BUILD/bin/sprofil
[ -x "$TOOL" ] || { echo "build sprofil_tool in $BUILD first" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf (linux-perf) is needed" >&2; exit 2; }
c++ -O2 -g -pthread "$here/short_tasks.cpp" -o "$dir/short_tasks"
cc -O2 "$here/spawn_cpu.c" -o "$dir/spawn_cpu"
prog=("$dir/short_tasks")
configs=("native=" "perf record=perf record -q -e task-clock ${PERF_SCOPE[*]} -F $HZ -o $dir/p.data --"
  "perf record x4=perf record -q -e task-clock ${PERF_SCOPE[*]} -F $((4 * HZ)) -o $dir/p4.data --"
  "record=$TOOL record -q -F $HZ -o $dir/s.sprof --"
  "record --agent=$TOOL record --agent -q -F $HZ -o $dir/a.sprof --")
base=()
if [ -n "${BASE_BUILD:-}" ]; then
  BASE=$(cd "$BASE_BUILD" && pwd)
  base=("$BASE/bin/sprofil")
  configs+=("base record=${base[0]} record -q -F $HZ -o $dir/b.sprof --")
fi
echo "short_tasks (4,000 std::async tasks of about 0.5 ms, two at a time) at $HZ Hz"
"$PY" "$here/cpu_rounds.py" "$dir/spawn_cpu" "$ROUNDS" "${configs[@]}" -- "${prog[@]}"
share() {  # the share of work() in a profile, percent
  "$1" report --format json "$2" | "$PY" -c '
import json, sys
j = json.load(sys.stdin)
print("%.1f" % sum(r["percent"] for r in j["rows"] if r["name"].startswith("work")))'
}
for f in "$HZ" $((4 * HZ)); do
  perf record -q -e task-clock "${PERF_SCOPE[@]}" -F "$f" -o "$dir/p.data" -- "${prog[@]}" >/dev/null 2>&1
  echo "perf record -F $f: work() $(perf report -i "$dir/p.data" --stdio --sort sym 2>/dev/null |
    awk '/\] work/ {sub("%", "", $1); print $1}')% of $(perf report -i "$dir/p.data" --stdio 2>/dev/null |
    awk '/^# Samples/ {print $3}') samples"
done
"$TOOL" record -q -F "$HZ" -o "$dir/s.sprof" -- "${prog[@]}" >/dev/null 2>&1
echo "record: work() $(share "$TOOL" "$dir/s.sprof")% of the samples"
"$TOOL" record --agent -q -F "$HZ" -o "$dir/a.sprof" -- "${prog[@]}" >/dev/null 2>&1
echo "record --agent: work() $(share "$TOOL" "$dir/a.sprof")% of the samples"
if [ ${#base[@]} -gt 0 ]; then
  "${base[0]}" record -q -F "$HZ" -o "$dir/b.sprof" -- "${prog[@]}" >/dev/null 2>&1
  echo "base record: work() $(share "${base[0]}" "$dir/b.sprof")% of the samples"
fi
