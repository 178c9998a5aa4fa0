# Shared by the bench/*.sh scripts (sourced): a scratch directory removed at exit with the
# background processes registered in `pids`, and the median of numbers on stdin.
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

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
