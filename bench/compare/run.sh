#!/bin/sh
# Every figure of the default profile's goals in one run, and sprofil side by side with
# gperftools, glibc sprofil(3), perf record and gprof: overhead, delivered rate and cost per
# sample against the perf-signal floor, accuracy at equal sample counts, report speed and memory
# on a large generated binary, the no-perf fallback (goal 3), threads whatever their signal mask
# (goal 4), scale (goal 5), and goal 1's tests when a test build exists. Ends with one goal
# table (docs/benchmarks.md, "The default profile: the goals") and the sections' durations.
# Builds what it needs in build-compare (Release, tests off; the `compare` target), then runs
# bench/compare/compare.py. QUICK=1 is a smoke run of under 6 minutes; the full run about
# 25 minutes on the 2-core machine of docs/benchmarks.md. Not a test: CI never runs it. Needs
# perf (linux-perf), gperftools (libprofiler.so, google-pprof), gprof, hyperfine, cc and
# python3; go (golang-go) for the cgo row. Run as root or with perf_event_paranoid <= 1 for the
# signal counts (perf stat on a tracepoint).
# Environment: BUILD (default build-compare), WORK (default /tmp/sprofil-compare), QUICK=1,
# SECTIONS, TEST_BUILD, and the settings compare.py, fallback.py, signal_masks.py, scale.py
# and spawn.py document.
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
