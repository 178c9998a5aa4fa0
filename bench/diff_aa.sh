#!/usr/bin/env bash
# The false-positive rate of `sprofil diff` over repeated A/A comparisons: N pairs of runs of the
# same program (tests/report/diff_prog.cpp: three functions, one doing FACTOR times the work of
# the others), each pair diffed; a pair is a false positive when any row is flagged significant.
# Holm's correction bounds that family-wise rate by alpha (0.05) if the counts are binomial.
# Also prints the distribution of each pair's largest share change (points), what
# tests/report's Diff.SameProgramTwiceFlagsAlmostNothing bounds by 12: aliasing of the
# program's rounds with the sampling shows in its tail, not in the median.
# DIFF_PROG=PATH takes the program from elsewhere (a build without tests, e.g. of another
# commit: the same program for an A/B of the profiler).
# Usage: [DIFF_PROG=PATH] bench/diff_aa.sh [BUILD_DIR] [N] [ITERATIONS] [FREQUENCY]
#        (defaults: build, 50, 40000000 ~ 0.2 s per run, 1000 Hz)
set -euo pipefail
BUILD=${1:-build}
N=${2:-50}
ITER=${3:-40000000}
HZ=${4:-1000}
TOOL=$BUILD/bin/sprofil
PROG=${DIFF_PROG:-$BUILD/bin/report_diff_prog}
[ -x "$TOOL" ] && [ -x "$PROG" ] || { echo "build sprofil_tool and report_diff_prog first" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
flagged_pairs=0
flagged_rows=0
raw_rows=0
rows=0
samples=0
: >"$dir/largest"
for ((i = 0; i < N; i++)); do
  timeout 120 "$TOOL" record -F "$HZ" -o "$dir/a.sprof" -- "$PROG" "$ITER" 1 >/dev/null 2>&1
  timeout 120 "$TOOL" record -F "$HZ" -o "$dir/b.sprof" -- "$PROG" "$ITER" 1 >/dev/null 2>&1
  "$TOOL" diff "$dir/a.sprof" "$dir/b.sprof" --format csv >"$dir/d.csv"
  sig=$(tail -n +2 "$dir/d.csv" | grep -c '^1,' || true)
  n=$(tail -n +2 "$dir/d.csv" | wc -l)
  # Uncorrected: rows whose raw p-value (column 10) is below 0.05 (binomial counts: ~5%).
  raw=$(tail -n +2 "$dir/d.csv" | awk -F, '$10 < 0.05' | wc -l)
  raw_rows=$((raw_rows + raw))
  s=$("$TOOL" report "$dir/a.sprof" --format json | grep -o '"total_samples": *[0-9]*' | head -1 | grep -o '[0-9]*$')
  rows=$((rows + n))
  tail -n +2 "$dir/d.csv" | awk -F, '{c = $4 < 0 ? -$4 : $4; if (c > m) m = c} END {print m + 0}' \
    >>"$dir/largest"
  samples=$((samples + s))
  flagged_rows=$((flagged_rows + sig))
  if ((sig > 0)); then flagged_pairs=$((flagged_pairs + 1)); fi
done
echo "A/A pairs: $N at $HZ Hz, $ITER iterations, mean samples per run: $((samples / N)), rows compared: $rows"
echo "pairs with any significant row: $flagged_pairs ($(awk -v a=$flagged_pairs -v n=$N 'BEGIN{printf "%.1f", 100*a/n}')%)"
echo "rows with raw p < 0.05 (no correction): $raw_rows of $rows ($(awk -v a=$raw_rows -v n=$rows 'BEGIN{printf "%.2f", n?100*a/n:0}')%)"
echo "rows flagged: $flagged_rows of $rows ($(awk -v a=$flagged_rows -v n=$rows 'BEGIN{printf "%.2f", n?100*a/n:0}')%)"
over=$(awk '$1 > 12' "$dir/largest" | wc -l)
sort -g "$dir/largest" | awk -v o="$over" '{ v[NR] = $1 } END {
  printf "largest share change in a pair, points: median %.1f, 90th %.1f, 95th %.1f, max %.1f; pairs over 12: %d\n",
    v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.5)], v[int(NR * 0.95 + 0.5)], v[NR], o
}'
