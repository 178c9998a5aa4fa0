#!/usr/bin/env bash
# Pieces of drain mode's start, each in N fresh processes (bench/start_pieces.c), medians
# in microseconds of thread CPU: the first move of an fd to the top of RLIMIT_NOFILE (what
# place_fd costs a process once: its fd table grows to the limit) against a dup to a low fd;
# the first writes to six record pages of a file's reserved, shared-mapped space with
# MADV_RANDOM (the agent's), without it (the kernel's read-ahead), and as pwrite()s; the
# header's command line from /proc/self/cmdline against argv (each followed by the readlink of
# /proc/self/exe that the start does next: a process's first /proc access costs more); and the
# threads from a read of /proc/self/task against its link count; the write() that wakes a
# thread asleep on the other, idle CPU against one on the writer's own CPU (what each wake-up
# of the record parent costs the process that sends it). DIR is a directory on the file
# system the profiles go to.
# Usage: bench/start_pieces.sh [N] [DIR]   (defaults: 200, /tmp)
set -euo pipefail
N=${1:-200}
DIR=${2:-/tmp}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
cc -O2 -Wall -pthread "$here/start_pieces.c" -o "$dir/start_pieces"
echo "RLIMIT_NOFILE soft limit: $(ulimit -Sn); $N processes each"
for ((i = 0; i < N; i++)); do "$dir/start_pieces" dup "$DIR"; done >"$dir/dup"
for ((i = 0; i < N; i++)); do "$dir/start_pieces" faults "$DIR"; done >"$dir/faults"
for ((i = 0; i < N; i++)); do
  "$dir/start_pieces" proc-file "$DIR" >>"$dir/proc-file"
  "$dir/start_pieces" proc-argv "$DIR" >>"$dir/proc-argv"
done
if (($(nproc) >= 2)); then
  for ((i = 0; i < N; i++)); do "$dir/start_pieces" wake "$DIR"; done >"$dir/wake"
  for col in 2 4; do
    name=$(awk -v c=$((col - 1)) 'NR == 1 {print $c}' "$dir/wake")
    echo "wake-up of a sleeping thread, $name CPU: $(awk -v c=$col '{print $c}' "$dir/wake" | median) us"
  done
fi
for col in 2 4; do
  name=$(awk -v c=$((col - 1)) 'NR == 1 {print $c}' "$dir/dup")
  echo "first dup, $name: $(awk -v c=$col '{print $c}' "$dir/dup" | median) us"
done
for col in 2 4 6; do
  name=$(awk -v c=$((col - 1)) 'NR == 1 {print $c}' "$dir/faults")
  echo "six record pages, $name: $(awk -v c=$col '{print $c}' "$dir/faults" | median) us"
done
for f in proc-file proc-argv; do
  for col in 2 4; do
    name=$(awk -v c=$((col - 1)) 'NR == 1 {print $c}' "$dir/$f")
    echo "$f, $name: $(awk -v c=$col '{print $c}' "$dir/$f" | median) us"
  done
done
