#!/usr/bin/env bash
# The dlopen path with many objects, two builds of sprofil side by side: goal 5's workload
# (bench/compare/scale.py: scale-objects-few --dlopen DIR N, each of N distinct shared objects
# dlopen'd and called once), natively and under each build's `sprofil record -F 1000`, ROUNDS
# rounds in turn. Per configuration, the medians of: the program's wall time and CPU (its own,
# from /usr/bin/time run inside the record), the whole run's wall time and CPU (the record
# parent's too), and the record's end (the whole run's wall time less the program's). Each
# build writes to its own output file, which is there from the round before (as when a user
# records again), except in the first round.
# The workloads are the ones scale.py compiles into $WORK/scale (common.py's WORK, default
# /tmp/sprofil-compare); they are compiled here if missing (OBJECTS copies of one object).
# Usage: BASE_BUILD=DIR bench/dlopen_ab.sh [BUILD_DIR] [N] [ROUNDS]   (build-compare, 5000, 5)
set -euo pipefail
BUILD=${1:-build-compare}
N=${2:-5000}
ROUNDS=${3:-5}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
compare_build "$BUILD"
[ -n "${BASE_BUILD:-}" ] && [ -x "$BASE_BUILD/bin/sprofil" ] ||
  { echo "BASE_BUILD=DIR: another build of sprofil is needed" >&2; exit 2; }
BASE_TOOL=$(cd "$BASE_BUILD" && pwd)/bin/sprofil
swork=${WORK:-/tmp/sprofil-compare}/scale
if [ ! -x "$swork/scale-objects-few" ] || [ ! -e "$swork/dl/libdl$(printf %05d $((N - 1))).so" ]; then
  (cd "$here/compare" && OBJECTS=$N python3 -c 'import scale; scale.build()')
fi
prog=("$swork/scale-objects-few" --dlopen "$swork/dl" "$N")
time_fmt() { echo "$1 %e %U %S"; }
for ((r = 0; r < ROUNDS; r++)); do
  /usr/bin/time -f "$(time_fmt "native prog")" "${prog[@]}" 2>&1 >/dev/null | tail -1
  order=("new $TOOL" "base $BASE_TOOL")
  ((r % 2)) && order=("base $BASE_TOOL" "new $TOOL")
  for t in "${order[@]}"; do
    label=${t%% *}
    /usr/bin/time -f "$(time_fmt "$label run")" "${t#* }" record -F 1000 -o "$dir/$label.sprof" -- \
      /usr/bin/time -f "$(time_fmt "$label prog")" "${prog[@]}" 2>&1 >/dev/null |
      grep -E "^$label (run|prog) "
  done
done >"$dir/rows"
echo "scale-objects-few --dlopen DIR $N, $ROUNDS rounds in turn; medians (s)"
for label in native base new; do
  for what in prog run; do
    grep -q "^$label $what " "$dir/rows" || continue
    wall=$(awk -v k="$label $what" '$1 " " $2 == k {print $3}' "$dir/rows" | median)
    cpu=$(awk -v k="$label $what" '$1 " " $2 == k {print $4 + $5}' "$dir/rows" | median)
    echo "$label $what: wall $wall, CPU $cpu"
  done
  if grep -q "^$label run " "$dir/rows"; then
    # The record's end: each round's run wall less its program's wall (rounds 2 on: a file
    # to replace).
    ends=$(awk -v l="$label" '$1 == l && $2 == "prog" {p = $3} $1 == l && $2 == "run" {
      if (++k > 1) print $3 - p}' "$dir/rows" | median)
    echo "$label record's end, an output file there: $ends"
  fi
done
