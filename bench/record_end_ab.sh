#!/usr/bin/env bash
# What record's own start and end cost one run, against another build: the wall time of
# `sprofil record -o F -- /bin/true` (a run that is nearly all record's: the events and rings
# opened, the fork, the last passes, tell_last_losses' visit of each ring's CPU, the write)
# with BUILD's tool ("new") and BASE_BUILD's ("base"), ROUNDS rounds, the two in alternating
# order. Then the medians and the per-round difference new - base with its 95% interval
# (bench/paired.py).
# Usage: BASE_BUILD=DIR bench/record_end_ab.sh [BUILD_DIR] [ROUNDS]
#        (defaults: build-compare, 300)
set -euo pipefail
BUILD=${1:-build-compare}
ROUNDS=${2:-300}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/common.sh"
: "${BASE_BUILD:?BASE_BUILD=DIR: the build to compare with}"
"$PY" - "$BUILD/bin/sprofil" "$BASE_BUILD/bin/sprofil" "$ROUNDS" "$dir" >"$dir/rows" <<'EOF'
import subprocess, sys, time
new, base, rounds, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
tools = {"new": new, "base": base}
for r in range(rounds):
    for label in (("new", "base") if r % 2 == 0 else ("base", "new")):
        start = time.perf_counter()
        subprocess.run([tools[label], "record", "-o", out + "/p.sprof", "--", "/bin/true"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        print(label, (time.perf_counter() - start) * 1e3)
EOF
"$PY" "$here/paired.py" "$dir/rows" 3 ms new-base
