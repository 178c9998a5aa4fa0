#!/usr/bin/env bash
# Where a short process's CPU goes, split in three by a preloaded probe (bench/process_probe.c):
# the exec and the loader (up to the probe's constructor, which runs before the agent's), the
# agent's start, main and the agent's exit handler (up to the probe's exit handler), and the end
# of the process (the rest of wait4's user + system time: libc's exit, the kernel's teardown of
# the memory, the perf events, the files). cmp-burn4 --iters 1000 spawned N times by
# bench/spawn_cpu.c, natively, with the library preloaded and no SPROFIL_OUTPUT ("library"),
# under `sprofil record` (drain mode) and under `perf record -e task-clock $PERF_SCOPE`, ROUNDS
# rounds in turn; medians of the processes of each, then the median over the rounds.
# Usage: bench/process_split.sh [BUILD_DIR] [N] [ROUNDS]   (defaults: build-compare, 200, 4)
set -euo pipefail
BUILD=${1:-build-compare}
N=${2:-200}
ROUNDS=${3:-4}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
compare_build "$BUILD"
cc -O2 -Wall "$here/spawn_cpu.c" -o "$dir/spawn_cpu"
cc -O2 -Wall -shared -fPIC "$here/process_probe.c" -o "$dir/probe.so"
run=("$dir/spawn_cpu" x "$N" "$PROG" --iters 1000)
# The probe after whatever LD_PRELOAD the tool set (the agent), so that it starts first.
with_probe=(sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$0" exec "$@"' "$dir/probe.so")
export SPAWN_EACH=1
for ((r = 0; r < ROUNDS; r++)); do
  "${with_probe[@]}" "${run[@]}" 2>"$dir/native.$r" >/dev/null
  LD_PRELOAD="$BUILD/lib/libsprofil.so" "${with_probe[@]}" "${run[@]}" 2>"$dir/library.$r" >/dev/null
  "$TOOL" record --agent -F 1000 -o "$dir/p.sprof" -- "${with_probe[@]}" "${run[@]}" 2>"$dir/drain.$r" >/dev/null
  perf record -q -e task-clock "${PERF_SCOPE[@]}" -F 1000 -o "$dir/p.data" -- \
    "${with_probe[@]}" "${run[@]}" 2>"$dir/perf.$r" >/dev/null
done
python3 - "$dir" "$ROUNDS" <<'PY'
import statistics, sys

d, rounds = sys.argv[1], int(sys.argv[2])


def split(path):
    """Per process: (loader, agent+main, end) in ms, from each W line and the Q before it."""
    rows, q = [], None
    for line in open(path):
        f = line.split()
        if f and f[0] == "Q" and len(f) == 3:
            q = (int(f[1]), int(f[2]))
        elif f and f[0] == "W" and len(f) == 2 and q:
            w = int(f[1])
            rows.append((q[0] / 1e3, (q[1] - q[0]) / 1e3, (w - q[1]) / 1e3, w / 1e3))
            q = None
    return rows


print("cmp-burn4 --iters 1000, CPU a process in ms (medians of the processes, median of %d rounds)"
      % rounds)
print("%-8s %9s %14s %9s %9s" % ("", "to probe", "agent + main", "end", "total"))
for label in ("native", "library", "drain", "perf"):
    per_round = []
    for r in range(rounds):
        rows = split("%s/%s.%d" % (d, label, r))
        if rows:
            per_round.append([statistics.median(x[i] for x in rows) for i in range(4)])
    if per_round:
        m = [statistics.median(x[i] for x in per_round) for i in range(4)]
        print("%-8s %9.3f %14.3f %9.3f %9.3f" % (label, *m))
PY
