#!/usr/bin/env bash
# Where a short process's cost under `sprofil record` comes from, on both sides of the
# exchange: cmp-burn4 --iters 1000 started N times by bench/spawn_cpu.c, ROUNDS rounds, the
# configurations in turn each round:
#   native       the program alone
#   preload      an empty shared library in LD_PRELOAD (what any preloaded library costs)
#   idle         libsprofil.so in LD_PRELOAD without SPROFIL_OUTPUT (the agent loaded, not
#                started: its load, relocations and constructors)
#   perf         perf record -e task-clock $PERF_SCOPE -F 1000
#   drain        sprofil record -F 1000 -o in a scratch directory under WORK (default: this
#                script's scratch directory, on the disk that holds /tmp): the run directory of
#                the processes' files beside it
#   drain-tmpfs  the same with --scratch on /dev/shm, where that is a tmpfs (the run directory
#                there, the profile still under WORK)
# For each: the program's own CPU a process (spawn_cpu's median) and the whole tree's CPU a
# process (the tool, spawn_cpu and every process, from wait4 of the top process, divided by N),
# with the medians and the paired per-round differences (bench/paired.py).
# Usage: [WORK=DIR] bench/spawn_floor.sh [BUILD_DIR] [N] [ROUNDS]  (defaults: build-compare, 300, 8)
set -euo pipefail
BUILD=${1:-build-compare}
N=${2:-300}
ROUNDS=${3:-8}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
compare_build "$BUILD"
cc -O2 -Wall "$here/spawn_cpu.c" -o "$dir/spawn_cpu"
echo 'int spawn_floor_empty;' >"$dir/empty.c"
cc -O2 -shared -fPIC "$dir/empty.c" -o "$dir/libempty.so"
LIB=$BUILD/lib/libsprofil.so
work=$(mktemp -d "${WORK:-$dir}/spawn-floor.XXXXXX")
configs=(native preload idle perf drain)
shm=""
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
  shm=$(mktemp -d /dev/shm/spawn-floor.XXXXXX)
  configs+=(drain-tmpfs)
fi
trap 'rm -rf "$work" ${shm:+"$shm"}; cleanup' EXIT
run=("$dir/spawn_cpu")
args=("$PROG" --iters 1000)
for ((r = 0; r < ROUNDS; r++)); do
  for c in "${configs[@]}"; do
    case $c in
      native) tree "$c" "${run[@]}" "$c" "$N" "${args[@]}" ;;
      preload) tree "$c" env LD_PRELOAD="$dir/libempty.so" "${run[@]}" "$c" "$N" "${args[@]}" ;;
      idle) tree "$c" env LD_PRELOAD="$LIB" "${run[@]}" "$c" "$N" "${args[@]}" ;;
      perf) tree "$c" perf record -q -e task-clock "${PERF_SCOPE[@]}" -F 1000 -o "$work/p.data" -- \
        "${run[@]}" "$c" "$N" "${args[@]}" ;;
      drain) tree "$c" "$TOOL" record --agent -q -F 1000 -o "$work/p.sprof" -- \
        "${run[@]}" "$c" "$N" "${args[@]}" ;;
      drain-tmpfs) tree "$c" "$TOOL" record --agent -q -F 1000 --scratch "$shm" -o "$work/p.sprof" -- \
        "${run[@]}" "$c" "$N" "${args[@]}" ;;
    esac
  done
done 3>"$dir/tree" 2>&1 | grep -E '^(native|preload|idle|perf|drain|drain-tmpfs) ' >"$dir/rows"
# (paired.py splits a pair at "-": drain-tmpfs is "tmpfs" in its rows)
sed -i 's/^drain-tmpfs /tmpfs /' "$dir/rows" "$dir/tree"
pairs=(preload-native idle-native idle-preload perf-native drain-native drain-perf tmpfs-perf
  drain-tmpfs)
echo "cmp-burn4 --iters 1000 spawned $N times, $ROUNDS rounds in turn (tmpfs: drain with --scratch on /dev/shm)"
echo "-- the program's own CPU a process"
python3 "$here/paired.py" "$dir/rows" 3 ms "${pairs[@]}"
echo "-- the whole tree's CPU a process (the tool's own work included)"
python3 "$here/paired.py" "$dir/tree" 3 ms "${pairs[@]}"
