#!/bin/sh
# Scale benchmarks of `sprofil record` (issue 10, goal 5): 64 threads on the machine's cores
# against 1 thread doing the same work, the per-sample cost with 5,000 shared objects loaded,
# and the start-up and dlopen time the agent adds with 5,000 objects. Builds the tool in
# BUILD (default build) if needed, compiles its small workloads into WORK, prints markdown
# (docs/benchmarks.md "Scale"). Not a test: CI never runs it. About 10 minutes on 2 cores.
# Environment: BUILD, WORK, RUNS, OBJECTS, CLOCKS (see scale.py).
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD
[ -x "$BUILD/bin/sprofil" ] || cmake --build "$BUILD" --target sprofil_tool sprofil >/dev/null
python3 bench/scale/scale.py
