#!/usr/bin/env bash
# What profiling costs each of many short processes, with no interpreter in the loop:
# cmp-burn4 --iters 1000 started N times by bench/spawn_cpu.c (posix_spawn), its own CPU
# (wait4's user + system), natively, under `perf record -e task-clock $PERF_SCOPE`, under
# `sprofil record` ("outside": record's default, nothing loaded into the processes), the same
# with SPROFIL_JITTER=0 ("nojitter": no period re-drawn) and under `sprofil record
# --agent` ("drain"), ROUNDS rounds in turn; CONFIGS (env) picks configurations, in the order
# given (default: native perf outside drain). With BASE_BUILD=DIR also that build's
# `sprofil record` ("base"), the two builds in alternating order. Then the medians and the per-round differences with their 95%
# intervals (bench/paired.py), and the interrupts each configuration's N processes drew, from
# /proc/interrupts summed over the CPUs (the disk's, the function-call IPIs, the TLB
# shootdowns), counted up to 6 s after the run (ext4 commits its journal every 5 s).
# Usage: [BASE_BUILD=DIR] bench/spawn_ab.sh [BUILD_DIR] [N] [ROUNDS]
#        (defaults: build-compare, 300, 10)
set -euo pipefail
BUILD=${1:-build-compare}
N=${2:-300}
ROUNDS=${3:-10}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
compare_build "$BUILD"
cc -O2 -Wall "$here/spawn_cpu.c" -o "$dir/spawn_cpu"
run=("$dir/spawn_cpu")
read -r -a configs <<<"${CONFIGS:-native perf outside drain}"
[ -n "${BASE_BUILD:-}" ] && configs+=(base)
# The interrupts of the lines named, summed over the CPUs: "disk N ipi N tlb N".
interrupts() {
  awk '/virtio.*-req|nvme|ahci|ata_piix/ {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) d += $i}
       $1 == "CAL:" {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) c += $i}
       $1 == "TLB:" {for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) t += $i}
       END {print d + 0, c + 0, t + 0}' /proc/interrupts
}
for ((r = 0; r < ROUNDS; r++)); do
  # The two builds of the tool in alternating order (as in start_cost.sh).
  order=("${configs[@]}")
  if [ -n "${BASE_BUILD:-}" ] && ((r % 2)); then
    n=${#configs[@]}
    order=("${configs[@]:0:n-2}" base "${configs[n-2]}")
  fi
  for c in "${order[@]}"; do
    before=$(interrupts)
    case $c in
      native) "${run[@]}" native "$N" "$PROG" --iters 1000 ;;
      perf) perf record -q -e task-clock "${PERF_SCOPE[@]}" -F 1000 -o "$dir/p.data" -- \
        "${run[@]}" perf "$N" "$PROG" --iters 1000 ;;
      outside) "$TOOL" record -F 1000 -o "$dir/p.sprof" -- "${run[@]}" outside "$N" "$PROG" --iters 1000 ;;
      nojitter) SPROFIL_JITTER=0 "$TOOL" record -F 1000 -o "$dir/p.sprof" -- \
        "${run[@]}" nojitter "$N" "$PROG" --iters 1000 ;;
      drain) "$TOOL" record --agent -F 1000 -o "$dir/p.sprof" -- "${run[@]}" drain "$N" "$PROG" --iters 1000 ;;
      base) "$BASE_BUILD/bin/sprofil" record -F 1000 -o "$dir/p.sprof" -- \
        "${run[@]}" base "$N" "$PROG" --iters 1000 ;;
    esac
    if ((r == 0)); then
      sleep 6
      read -r d0 c0 t0 <<<"$before"
      read -r d1 c1 t1 <<<"$(interrupts)"
      echo "interrupts of $c's $N processes: disk $((d1 - d0)), function-call IPIs $((c1 - c0)), TLB shootdowns $((t1 - t0))" >>"$dir/irq"
    fi
  done
done 2>&1 | grep -E '^(native|perf|outside|nojitter|drain|base) ' >"$dir/rows"
echo "cmp-burn4 --iters 1000 spawned $N times, the program's own CPU, $ROUNDS rounds in turn"
python3 "$here/paired.py" "$dir/rows" 3 ms outside-perf nojitter-perf \
  outside-nojitter drain-perf drain-base perf-native outside-native drain-native
cat "$dir/irq"
