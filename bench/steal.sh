#!/usr/bin/env bash
# The perf clock under a busy host (docs/architecture.md "Steal", perf::steal_free): three
# busy loops share the 2 CPUs with the profiled program, so the host steals time from its
# virtual CPUs and the task clock runs ahead of the CPU clocks.
# 1. Two loops of 1:2 work (tests/report's annotate_prog, 200,000,000 iterations) recorded
#    at 10 kHz in each perf mode: coverage (samples for the process's CPU time), the share of
#    samples marked system, and the first loop's share of the two (33.3% is the truth).
# 2. Two worker threads of 0.4 s each (tests/agent's drain_blocked) with the record parent
#    stopped (SIGSTOP) for 1.2 s, so it drains records of threads that are gone: counted and
#    lost samples against the workers' CPU time.
# Prints one row per run and the medians per mode.
# Usage: bench/steal.sh [BUILD_DIR] [ROUNDS]   (defaults: build, 3)
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
TOOL=$BUILD/bin/sprofil
for b in "$TOOL" "$BUILD/bin/report_annotate_prog" "$BUILD/bin/agent_drain_blocked"; do
  [ -x "$b" ] || { echo "build $b first" >&2; exit 2; }
done
source "$(dirname "$0")/common.sh"
for _ in 1 2 3; do
  sh -c 'while :; do :; done' &
  pids+=($!)
done

echo "1. two loops of 1:2 work at 10 kHz beside three busy loops"
printf '%-7s %9s %9s %12s\n' mode coverage "system %" "loop one %"
for mode in signal ring drain; do
  : >"$dir/$mode"
  for ((r = 0; r < ROUNDS; r++)); do
    SPROFIL_PERF_MODE=$mode "$TOOL" record --agent --clock perf -F 10000 -o "$dir/l.sprof" -- \
      "$BUILD/bin/report_annotate_prog" loops 200000000 >/dev/null 2>&1
    "$TOOL" report "$dir/l.sprof" --by line --format json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
lines = {}
for r in j["rows"]:
    if r.get("file", "").endswith("annotate_prog.cpp"):
        lines[r["line"]] = lines.get(r["line"], 0) + r["samples"]
loops = sorted(lines.items(), key=lambda kv: -kv[1])[:2]
first = min(loops)[1] if loops else 0
both = sum(v for _, v in loops) or 1
print("%.4f %.2f %.2f" % (j["coverage"], 100.0 * j["system_samples"] / max(j["total_samples"], 1),
                          100.0 * first / both))' >>"$dir/$mode"
    printf '%-7s %9s %9s %12s\n' "$mode" $(tail -1 "$dir/$mode")
  done
done
echo "medians:"
for mode in signal ring drain; do
  printf '%-7s %9s %9s %12s\n' "$mode" "$(cut -d' ' -f1 "$dir/$mode" | median)" \
    "$(cut -d' ' -f2 "$dir/$mode" | median)" "$(cut -d' ' -f3 "$dir/$mode" | median)"
done

echo
echo "2. two 0.4 s workers (drain mode, 1 kHz), the record parent stopped for 1.2 s"
printf '%10s %10s %10s %10s\n' "worker s" "counted s" "lost s" "counted/cpu"
: >"$dir/lag"
for ((r = 0; r < ROUNDS; r++)); do
  "$TOOL" record --agent -F 1000 -o "$dir/b.sprof" -- "$BUILD/bin/agent_drain_blocked" libc 0.4 \
    >"$dir/b.out" 2>/dev/null &
  rec=$!
  sleep 0.05
  kill -STOP "$rec"
  sleep 1.2
  kill -CONT "$rec"
  wait "$rec"
  worker=$(awk '/worker_cpu_ns/ {print $2 / 1e9}' "$dir/b.out")
  "$TOOL" report "$dir/b.sprof" --format json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
w = float(sys.argv[1])
counted = j["total_samples"] / 1000.0
print("%.3f %.3f %.3f %.3f" % (w, counted, j["lost"] / 1000.0, counted / w))' "$worker" \
    >>"$dir/lag"
  printf '%10s %10s %10s %10s\n' $(tail -1 "$dir/lag")
done
echo "median counted/cpu: $(cut -d' ' -f4 "$dir/lag" | median)"
