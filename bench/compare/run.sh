#!/bin/sh
# Side-by-side benchmarks of sprofil against gperftools, glibc sprofil(3), perf record and
# gprof: overhead, delivered rate, cost per sample against the perf-signal floor, accuracy at
# equal sample counts, report speed and memory on a large generated binary. Builds what it
# needs in build-compare (Release, tests off; the `compare` target), runs
# bench/compare/compare.py and prints the markdown of docs/benchmarks.md's "Side by side"
# sections. About 15 minutes on the 2-core machine of docs/benchmarks.md (build ~2.5 min when
# cold); QUICK=1 takes about 4. Not a test: CI never runs it. Needs perf (linux-perf),
# gperftools (libprofiler.so, google-pprof), gprof, hyperfine and python3. Run as root or
# with perf_event_paranoid <= 1 for the signal counts (perf stat on a tracepoint).
# Environment: BUILD (default build-compare), WORK (default /tmp/sprofil-compare), QUICK=1,
# RUNS, ACC_N, ACC_RUNS, LARGE_SECONDS (see compare.py).
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-compare}
export BUILD
start=$(date +%s)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPROFIL_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" --target compare >/dev/null
echo "(build took $(( $(date +%s) - start )) s)" >&2
python3 bench/compare/compare.py
echo
echo "(bench/compare/run.sh took $(( $(date +%s) - start )) s in total)"
