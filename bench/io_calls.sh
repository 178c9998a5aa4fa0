#!/usr/bin/env bash
# The cost of the interposed read, write and timed-socket calls (src/clock/interpose_sockets.cpp)
# in a program under the agent: bench/io_calls.c natively, under `sprofil record --agent` (the
# perf clock: each call one atomic load more) and under `--clock sampler` (a table lookup; a
# socket with SO_RCVTIMEO: sprofil's signal blocked around the call, two rt_sigprocmask more),
# ROUNDS rounds in turn, N calls of each kind a round. Prints each configuration's median ns a
# call and its ratio to native's median. With BASE_BUILD=DIR, the same two configurations of
# that build too (base-agent, base-sampler), to tell the interposers' part from the sampling's.
# Usage: [BASE_BUILD=DIR] bench/io_calls.sh [BUILD_DIR] [N] [ROUNDS]   (build, 1000000, 7)
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
N=${2:-1000000}
ROUNDS=${3:-7}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
cc -O2 -o "$dir/io_calls" "$here/io_calls.c"
for ((r = 0; r < ROUNDS; r++)); do
  echo "native $("$dir/io_calls" "$N")"
  echo "agent $("$BUILD/bin/sprofil" record -q --agent -o "$dir/a.sprof" -- "$dir/io_calls" "$N")"
  echo "sampler $("$BUILD/bin/sprofil" record -q --clock sampler -o "$dir/s.sprof" -- "$dir/io_calls" "$N")"
  if [ -n "${BASE_BUILD:-}" ]; then
    echo "base-agent $("$BASE_BUILD/bin/sprofil" record -q --agent -o "$dir/a.sprof" -- "$dir/io_calls" "$N")"
    echo "base-sampler $("$BASE_BUILD/bin/sprofil" record -q --clock sampler -o "$dir/s.sprof" -- "$dir/io_calls" "$N")"
  fi
done >"$dir/rows"
confs=(native agent sampler)
[ -n "${BASE_BUILD:-}" ] && confs+=(base-agent base-sampler)
echo "io_calls $N calls of each kind, $ROUNDS rounds in turn; medians (ns a call), ratio to native"
for call in read write recv_timed; do
  col=$(awk -v c="$call" 'NR == 1 { for (i = 2; i <= NF; i += 2) if ($i == c) print i + 1 }' "$dir/rows")
  base=$(awk -v k="$col" '$1 == "native" { print $k }' "$dir/rows" | median)
  for conf in "${confs[@]}"; do
    m=$(awk -v k="$col" -v c="$conf" '$1 == c { print $k }' "$dir/rows" | median)
    awk -v c="$call" -v f="$conf" -v m="$m" -v b="$base" \
      'BEGIN { printf "%-10s %-12s %8.1f ns  %.3fx\n", c, f, m, m / b }'
  done
done
