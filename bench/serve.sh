#!/usr/bin/env bash
# `sprofil serve` on a large program: server start-up (exec to its "listening on" line) and the
# wall time of a 2 s scrape (curl, /pid/PID/debug/pprof/profile?seconds=2: two and more live
# snapshots of cc1plus, record's packed run profiles of it, the delta, symbolization of
# cc1plus, encoding), over N repetitions (default 5), each with a fresh cc1plus compiling
# tools/sprofil/gperf.cpp (preprocessed once; CLI11 headers, about 4 s of CPU at -O2) under
# `sprofil record --live`.
# Prints each repetition and the medians. Not a test: CI never runs it.
# Usage: bench/serve.sh [BUILD_DIR] [N]      (defaults: build, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
N=${2:-5}
TOOL=$BUILD/bin/sprofil
[ -x "$TOOL" ] || { echo "build sprofil_tool and sprofil first" >&2; exit 2; }
command -v curl >/dev/null || { echo "curl is needed" >&2; exit 2; }
CC1=$(g++ -print-prog-name=cc1plus)
source bench/common.sh
export XDG_RUNTIME_DIR=$dir
g++ -std=c++20 -O2 -DNDEBUG -Isrc -Iinclude -E tools/sprofil/gperf.cpp -o "$dir/big.ii"

now_ms() { date +%s%3N; }

echo "rep  start-up_ms  scrape_ms  profile_bytes"
: >"$dir/start"
: >"$dir/scrape"
for ((i = 1; i <= N; i++)); do
  rm -rf "$dir/sprofil"
  "$TOOL" record --live -o "$dir/cc1.sprof" -- "$CC1" -quiet -O2 "$dir/big.ii" -o /dev/null \
    >/dev/null 2>&1 &
  rec=$!
  pids+=("$rec")
  # The target's socket (at most 10 s).
  sock=""
  for ((k = 0; k < 1000; k++)); do
    socks=("$dir"/sprofil/*.sock)
    [ -e "${socks[0]}" ] && sock=${socks[0]} && break
    sleep 0.01
  done
  [ -n "$sock" ] || { echo "cc1plus did not start serving" >&2; exit 1; }
  pid=$(basename "$sock" .sock)
  sleep 1 # cc1plus well under way
  t0=$(now_ms)
  "$TOOL" serve --listen 127.0.0.1:0 -q "$pid" 2>"$dir/serve.err" &
  srv=$!
  pids+=("$srv")
  port=""
  for ((k = 0; k < 2000; k++)); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$dir/serve.err" | grep -o '[0-9]*$' || true)
    [ -n "$port" ] && break
    sleep 0.005
  done
  t1=$(now_ms)
  [ -n "$port" ] || { echo "sprofil serve did not start: $(cat "$dir/serve.err")" >&2; exit 1; }
  out=$(curl -s --max-time 60 -o "$dir/p.pb.gz" -w '%{http_code} %{time_total} %{size_download}' \
    "http://127.0.0.1:$port/pid/$pid/debug/pprof/profile?seconds=2")
  read -r code total size <<<"$out"
  [ "$code" = 200 ] || { echo "scrape failed: HTTP $code" >&2; exit 1; }
  scrape=$(awk -v t="$total" 'BEGIN {printf "%d", t * 1000}')
  echo "$i    $((t1 - t0))          $scrape       $size"
  echo $((t1 - t0)) >>"$dir/start"
  echo "$scrape" >>"$dir/scrape"
  kill "$srv" "$pid" 2>/dev/null || true
  wait "$srv" 2>/dev/null || true
  wait "$rec" 2>/dev/null || true
done
echo "median start-up: $(median <"$dir/start") ms; median 2 s scrape: $(median <"$dir/scrape") ms" \
  "($N repetitions, $(nproc) cores, cc1plus $(basename "$(dirname "$CC1")"))"
