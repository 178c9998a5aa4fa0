#!/bin/sh
# Regenerates every figure in docs/benchmarks.md in one go: builds build-bench (Release,
# tests off), runs the handler microbenchmarks (5 repetitions, medians) and the signal-level
# benchmark (7 round-robin runs per mode, medians), and prints markdown tables.
# Takes about 2.5 minutes on the 2-core machine of docs/benchmarks.md (build ~30 s when
# cold, bench_handler ~40 s, bench_signal ~70 s). Not a test: CI never runs it.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-bench}
start=$(date +%s)

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPROFIL_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" --target bench_handler bench_signal >/dev/null

echo "## Machine"
echo
echo "- nproc: $(nproc)"
echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "- kernel: $(uname -r)"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- commit: $(git rev-parse --short HEAD)"
echo

echo "## Handler work without the signal (bench_handler, median of 5)"
echo
echo "Command: \`$BUILD/bin/bench_handler --benchmark_repetitions=5 --benchmark_min_time=0.3 --benchmark_report_aggregates_only=true --benchmark_format=csv\`"
echo
echo "| benchmark | real ns (median) | CPU ns (median) |"
echo "| --- | ---: | ---: |"
"$BUILD/bin/bench_handler" --benchmark_repetitions=5 --benchmark_min_time=0.3 \
  --benchmark_report_aggregates_only=true --benchmark_format=csv 2>/dev/null |
  awk -F, '/_median"/ { n = $1; gsub(/"/, "", n); sub(/_median$/, "", n);
                        printf "| %s | %.1f | %.1f |\n", n, $3, $4 }'
echo

echo "## Cost per sample at the signal level (bench_signal, median of 7)"
echo
echo "Command: \`$BUILD/bin/bench_signal 7\`"
echo
"$BUILD/bin/bench_signal" 7 2>/dev/null
echo
echo "(run.sh took $(( $(date +%s) - start )) s)"
