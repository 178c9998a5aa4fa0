#!/bin/sh
# The cost of each report format on a large profile: g++'s cc1plus compiling <bits/stdc++.h>
# (preprocessed once) is recorded at 10 kHz with 1-byte bins, then `sprofil report --format F`
# is timed for text, json, pprof and html: median wall time of 5 runs, the ratio to text's
# median in the same run, the output's size, and the report process's peak RSS.
# Usage: bench/report_formats.sh [BUILD_DIR]   (default build; the tool must be built).
# Not a test: CI never runs it. docs/benchmarks.md quotes its output.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
TOOL=$BUILD/bin/sprofil
CC1PLUS=$(g++ -print-prog-name=cc1plus)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo '#include <bits/stdc++.h>' > "$work/big.cpp"
g++ -std=c++20 -E "$work/big.cpp" -o "$work/big.ii"
SPROFIL_BIN_BYTES=1 "$TOOL" record -F 10000 -o "$work/cc1plus.sprof" -- \
  "$CC1PLUS" -std=c++20 -quiet -O2 "$work/big.ii" -o "$work/big.s" 2>"$work/record.log"
tail -1 "$work/record.log"
echo
echo "Profile: $(du -k "$work/cc1plus.sprof" | cut -f1) KB on disk; functions with samples: \
$("$TOOL" report --format csv "$work/cc1plus.sprof" 2>/dev/null | tail -n +2 | wc -l)"
echo
echo "| format | median s (5 runs) | vs text | output bytes | peak RSS MB |"
echo "| --- | ---: | ---: | ---: | ---: |"
text_median=
for f in text json pprof html; do
  times=
  for i in 1 2 3 4 5; do
    /usr/bin/time -o "$work/time" -f '%e %M' "$TOOL" report --format "$f" -o "$work/out.$f" \
      "$work/cc1plus.sprof" >/dev/null 2>&1
    t=$(tail -1 "$work/time")
    times="$times$t
"
  done
  median=$(printf '%s' "$times" | awk '{print $1}' | sort -n | sed -n 3p)
  rss=$(printf '%s' "$times" | awk '{print $2}' | sort -n | sed -n 3p)
  [ -z "$text_median" ] && text_median=$median
  ratio=$(awk -v a="$median" -v b="$text_median" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
  size=$(stat -c %s "$work/out.$f")
  echo "| $f | $median | $ratio | $size | $((rss / 1024)) |"
done
