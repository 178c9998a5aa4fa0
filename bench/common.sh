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
