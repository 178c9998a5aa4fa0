#!/usr/bin/env bash
# Two pieces of drain mode's start, each in N fresh processes (bench/start_pieces.c), medians
# in microseconds of thread CPU: the first move of an fd to the top of RLIMIT_NOFILE (what
# place_fd costs a process once: its fd table grows to the limit) against a dup to a low fd,
# and the first writes to six record pages of a file's reserved, shared-mapped space with
# MADV_RANDOM (the agent's), without it (the kernel's read-ahead), and as pwrite()s. DIR is a
# directory on the file system the profiles go to.
# Usage: bench/start_pieces.sh [N] [DIR]   (defaults: 200, /tmp)
set -euo pipefail
N=${1:-200}
DIR=${2:-/tmp}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
cc -O2 -Wall "$here/start_pieces.c" -o "$dir/start_pieces"
echo "RLIMIT_NOFILE soft limit: $(ulimit -Sn); $N processes each"
for ((i = 0; i < N; i++)); do "$dir/start_pieces" dup "$DIR"; done >"$dir/dup"
for ((i = 0; i < N; i++)); do "$dir/start_pieces" faults "$DIR"; done >"$dir/faults"
for col in 2 4; do
  name=$(awk -v c=$((col - 1)) 'NR == 1 {print $c}' "$dir/dup")
  echo "first dup, $name: $(awk -v c=$col '{print $c}' "$dir/dup" | median) us"
done
for col in 2 4 6; do
  name=$(awk -v c=$((col - 1)) 'NR == 1 {print $c}' "$dir/faults")
  echo "six record pages, $name: $(awk -v c=$col '{print $c}' "$dir/faults" | median) us"
done
