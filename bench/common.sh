# Shared by the bench/*.sh scripts (sourced): a scratch directory removed at exit with the
# background processes registered in `pids`, and the median of numbers on stdin.
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

# The Python interpreter itself, for what runs under a tool (process_cpu.py): `python3` may be a
# wrapper, and the tool would profile the wrapper's processes too (pyenv's shim is a bash script
# that runs about 40 processes before the interpreter: each round of drain_vs_perf.sh then made
# 40 process images' files, and the record parent's work for their ends ran beside cmp-burn4).
PY=$(python3 -c 'import sys; print(sys.executable)')

# perf record's options for the scope record's default (and --agent) samples, as
# bench/compare/common.py's PERF_SCOPE: the kernel's time too where record samples it (root, or
# perf_event_paranoid 1 or less), else user time only (docs/benchmarks.md, "perf record of the
# same scope"). Before 4aa1882 the scripts gave perf record --all-user always.
PERF_SCOPE=()
if [ "$(id -u)" != 0 ] && [ "$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 2)" -gt 1 ]; then
  PERF_SCOPE=(--all-user)
fi

# The median of the numbers on stdin, one per line or space-separated.
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

# The compare build's tool and cmp-burn4 for the side-by-side scripts (drain_vs_perf.sh,
# start_cost.sh, spawn_ab.sh): sets BUILD (absolute), TOOL and PROG from the build directory
# $1, and exits 2 when they or perf are missing.
compare_build() {
  BUILD=$(cd "$1" 2>/dev/null && pwd) || { echo "no build directory $1" >&2; exit 2; }
  TOOL=$BUILD/bin/sprofil
  PROG=$BUILD/bin/cmp-burn4
  [ -x "$TOOL" ] && [ -x "$PROG" ] || { echo "build the compare target in $BUILD first" >&2; exit 2; }
  command -v perf >/dev/null || { echo "perf (linux-perf) is needed" >&2; exit 2; }
}

# tree LABEL CMD...: runs CMD and prints "LABEL TREE_MS" on fd 3, the CPU of its whole tree
# (user + system, from wait4) per process started, N processes (spawn_floor.sh, agentless.sh).
tree() {
  local label=$1
  shift
  "$PY" -c '
import os, sys
label, n, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
pid = os.posix_spawnp(cmd[0], cmd, os.environ)
_, status, ru = os.wait4(pid, 0)
print(label, "%.3f" % ((ru.ru_utime + ru.ru_stime) * 1000 / n), file=sys.stderr)
sys.exit(0 if status == 0 else 1)' "$label" "$N" "$@" 2>&3
}

# The builds a script runs in turn (alias_runs.sh, swap_overlap.sh): sets `builds` to pairs of
# a name and a build directory, ("this" $1) and, with BASE_BUILD set, ("base" $BASE_BUILD);
# exits 2 where one has no bin/sprofil.
builds_in_turn() {
  builds=(this "$1")
  [ -n "${BASE_BUILD:-}" ] && builds+=(base "$BASE_BUILD")
  for ((k = 1; k < ${#builds[@]}; k += 2)); do
    [ -x "${builds[k]}/bin/sprofil" ] || { echo "no sprofil in ${builds[k]}/bin" >&2; exit 2; }
  done
}
