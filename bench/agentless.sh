#!/usr/bin/env bash
# What sampling with nothing loaded into the program would cost a short process (issue 10,
# goal 1 on short processes), with bench/agentless_probe.c, a measurement-only prototype:
# cmp-burn4 --iters 1000 (about 1 ms of CPU) started N times by bench/spawn_cpu.c, ROUNDS rounds,
# the configurations in turn each round:
#   native    the program alone
#   perf      perf record -e task-clock $PERF_SCOPE -F 1000 (inherited per-CPU events)
#   inherit   the probe in perf record's model: inherited per-CPU task-clock events, one fixed
#             period (no re-draw: the aliasing that goal 1 forbids)
#   open      the probe opening each new thread's event itself at the kernel's fork record
#             (per-CPU inherited tracker events, no sampling), its period drawn with jitter and
#             re-drawn every 64 samples
#   track     the probe's tracker alone: no thread's event opened (the tracker's records and the
#             parent's wake-ups, apart from the events' opening)
#   nocomm    the same as open with a tracker without comm records (no wake-up of the parent at an
#             exec; the mappings and the exec a real implementation needs would come through
#             records that do not wake it)
#   drain     sprofil record --agent -F 1000 --scratch on /dev/shm (the agent in each process; the
#             run directory on a tmpfs, so that the file system's cost is not in the tree's)
#   agentless sprofil record --agentless -F 1000, record's default: the design of `inherit`
#             built into record (src/record/agentless.cpp), with the mappings, the threads'
#             counters, the re-draws and the profile
# CONFIGS (env) picks configurations, in the order given (default: all).
# For each: the program's own CPU a process (spawn_cpu's median) and the whole tree's CPU a
# process (wait4 of the top process, divided by N), medians and paired per-round differences
# (bench/paired.py). Then one run of the probe with -g: the share of the processes' CPU that ran
# before their event was opened (the gap that opening it from outside leaves).
# Usage: bench/agentless.sh [BUILD_DIR] [N] [ROUNDS]  (defaults: build-compare, 300, 8)
set -euo pipefail
BUILD=${1:-build-compare}
N=${2:-300}
ROUNDS=${3:-8}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
compare_build "$BUILD"
cc -O2 -Wall "$here/spawn_cpu.c" -o "$dir/spawn_cpu"
cc -O2 -Wall "$here/agentless_probe.c" -o "$dir/probe"
[ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] || { echo "/dev/shm is not a tmpfs" >&2; exit 2; }
shm=$(mktemp -d /dev/shm/agentless.XXXXXX)
trap 'rm -rf "$shm"; cleanup' EXIT
run=("$dir/spawn_cpu")
args=("$PROG" --iters 1000)
read -r -a configs <<<"${CONFIGS:-native perf inherit track open nocomm drain agentless}"
for ((r = 0; r < ROUNDS; r++)); do
  for c in "${configs[@]}"; do
    case $c in
      native) tree "$c" "${run[@]}" "$c" "$N" "${args[@]}" ;;
      perf) tree "$c" perf record -q -e task-clock "${PERF_SCOPE[@]}" -F 1000 -o "$dir/p.data" -- \
        "${run[@]}" "$c" "$N" "${args[@]}" ;;
      inherit | open) tree "$c" "$dir/probe" "$c" -F 1000 -- "${run[@]}" "$c" "$N" "${args[@]}" ;;
      track) tree "$c" "$dir/probe" track -n -F 1000 -- "${run[@]}" "$c" "$N" "${args[@]}" ;;
      nocomm) tree "$c" "$dir/probe" open -n -F 1000 -- "${run[@]}" "$c" "$N" "${args[@]}" ;;
      drain) tree "$c" "$TOOL" record --agent -q -F 1000 --scratch "$shm" -o "$dir/p.sprof" -- \
        "${run[@]}" "$c" "$N" "${args[@]}" ;;
      agentless) tree "$c" "$TOOL" record --agentless -q -F 1000 -o "$dir/p.sprof" -- \
        "${run[@]}" "$c" "$N" "${args[@]}" ;;
    esac
  done
done 3>"$dir/tree.all" 2>&1 | grep -E '^(native|perf|inherit|track|open|nocomm|drain|agentless) ' >"$dir/rows"
# (the probe's own summary line goes to the tree's stream too: only the labelled rows are kept)
grep -E '^(native|perf|inherit|track|open|nocomm|drain|agentless) ' "$dir/tree.all" >"$dir/tree"
pairs=(perf-native inherit-perf track-perf open-perf nocomm-perf nocomm-track drain-perf nocomm-drain
  agentless-perf agentless-nocomm agentless-drain)
echo "cmp-burn4 --iters 1000 spawned $N times, $ROUNDS rounds in turn"
echo "-- the program's own CPU a process"
python3 "$here/paired.py" "$dir/rows" 3 ms "${pairs[@]}"
echo "-- the whole tree's CPU a process (the tool's own work included)"
python3 "$here/paired.py" "$dir/tree" 3 ms "${pairs[@]}"
echo "-- the CPU before each process's event was opened (open mode, one run of $N)"
"$dir/probe" open -n -g -F 1000 -- "${run[@]}" gap "$N" "${args[@]}" 2>&1 >/dev/null | grep gap
