#!/usr/bin/env bash
# What drain mode's start costs one process, and where it goes: cmp-burn4 with almost no work
# (one thread, --iters 1000), its own CPU (bench/process_cpu.py: user + system of the program,
# not the tool's) natively, under `perf record -e task-clock $PERF_SCOPE` and under
# `sprofil record` (drain mode), N runs each, ROUNDS rounds in turn; medians. Then, with
# PROFILE=1, a `perf record -g` of N runs natively and N under `sprofil record`, and the
# program's extra CPU split by the system call (or fault) it was in: the agent's file, its
# hand-overs, its page faults.
# With BASE_BUILD=DIR (another build of sprofil, e.g. of an earlier commit), its `sprofil record`
# runs too, in turn with the others ("base"), for an A/B of the agent's start. With SPAWN=1,
# drain mode and perf record also start the program with posix_spawn ("spawn", "perfspawn":
# process_cpu.py --spawn, no fork handler runs in the child): the part of drain mode's cost
# that a forked child pays before its exec (its event's hand-over, the exec's flush) is
# (drain - perf) - (spawn - perfspawn). The last lines are the medians over the rounds and the
# median per-round differences (bench/paired.py).
# Usage: [PROFILE=1] [SPAWN=1] [BASE_BUILD=DIR] bench/start_cost.sh [BUILD_DIR] [N] [ROUNDS]
#        (defaults: build-compare, 100, 2)
set -euo pipefail
BUILD=${1:-build-compare}
N=${2:-100}
ROUNDS=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
compare_build "$BUILD"
pc=("$PY" "$here/process_cpu.py")
run=("$PROG" --iters 1000)
BASE_TOOL=
if [ -n "${BASE_BUILD:-}" ]; then
  BASE_TOOL=$(cd "$BASE_BUILD" && pwd)/bin/sprofil
  [ -x "$BASE_TOOL" ] || { echo "no tool at $BASE_TOOL" >&2; exit 2; }
fi
echo "cmp-burn4 --iters 1000: the program's own CPU, median of $N runs, $ROUNDS rounds in turn"
for ((r = 0; r < ROUNDS; r++)); do
  "${pc[@]}" native "$N" "${run[@]}"
  perf record -q -e task-clock "${PERF_SCOPE[@]}" -F 1000 -o "$dir/p.data" -- "${pc[@]}" perf "$N" "${run[@]}"
  # The two builds of the tool in alternating order.
  tools=("drain $TOOL")
  [ -n "$BASE_TOOL" ] && tools=("drain $TOOL" "base $BASE_TOOL")
  [ -n "$BASE_TOOL" ] && ((r % 2)) && tools=("base $BASE_TOOL" "drain $TOOL")
  for t in "${tools[@]}"; do
    "${t#* }" record -F 1000 -o "$dir/p.sprof" -- "${pc[@]}" "${t%% *}" "$N" "${run[@]}"
  done
  if [ "${SPAWN:-0}" = 1 ]; then
    "$TOOL" record --agent -F 1000 -o "$dir/p.sprof" -- "${pc[@]}" --spawn spawn "$N" "${run[@]}"
    perf record -q -e task-clock "${PERF_SCOPE[@]}" -F 1000 -o "$dir/p.data" -- \
      "${pc[@]}" --spawn perfspawn "$N" "${run[@]}"
  fi
done 2>&1 | grep -E '^(native|perf|drain|base|spawn|perfspawn) ' | tee "$dir/rounds.txt"
python3 "$here/paired.py" "$dir/rounds.txt" 2 ms drain-perf drain-base perf-native \
  spawn-perfspawn
[ "${PROFILE:-0}" = 1 ] || exit 0
perf record -q -F 25000 -g -o "$dir/native.data" -- "${pc[@]}" native "$N" "${run[@]}" >/dev/null 2>&1
perf record -q -F 25000 -g -o "$dir/drain.data" -- \
  "$TOOL" record --agent -F 1000 -o "$dir/p.sprof" -- "${pc[@]}" drain "$N" "${run[@]}" >/dev/null 2>&1
for x in native drain; do
  perf script -i "$dir/$x.data" --comm cmp-burn4 -F period,ip,sym 2>/dev/null >"$dir/$x.txt"
done
python3 - "$dir/native.txt" "$dir/drain.txt" "$N" <<'PY'
import collections, sys


def split(path):
    """CPU ns by where the sample was: the kernel function just below the system call's entry
    (do_syscall_64) or the fault handler, else 'user'."""
    by = collections.Counter()
    for block in open(path).read().split("\n\n"):
        lines = [l.split() for l in block.strip().split("\n") if l.strip()]
        if len(lines) < 2 or not lines[0][0].isdigit():
            continue
        ns = int(lines[0][0])
        frames = [f[1] if len(f) > 1 else "?" for f in lines[1:]]
        key = "user"
        for i, f in enumerate(frames):
            if f in ("do_syscall_64", "exc_page_fault") and i > 0:
                key = "page faults" if f == "exc_page_fault" else frames[i - 1]
                break
        by[key] += ns
    return by


native, drain, n = split(sys.argv[1]), split(sys.argv[2]), int(sys.argv[3])
total = (sum(drain.values()) - sum(native.values())) / n / 1e6
print(f"\nExtra CPU per run under sprofil record: {total:.2f} ms; by place (ms per run, >= 0.02):")
for k in sorted(set(native) | set(drain), key=lambda k: native[k] - drain[k]):
    d = (drain[k] - native[k]) / n / 1e6
    if d >= 0.02:
        print(f"  {d:5.2f}  {k}")
PY
