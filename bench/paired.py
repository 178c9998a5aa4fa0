#!/usr/bin/env python3
"""Medians and paired differences of interleaved rounds, for the bench scripts that run
configurations in turn (drain_vs_perf.sh, start_cost.sh). ROWS holds lines "LABEL VALUE ...",
one per configuration per round, in round order. Prints each label's median, then for each
pair A-B (skipped where a label has no rows) the median of the per-round differences A - B
with a distribution-free 95% confidence interval (the sign test's order statistics). Labels
may hold hyphens: a pair is split at the hyphen where both sides are labels with rows.
Usage: bench/paired.py ROWS DIGITS UNIT A-B [A-B ...]"""
import math
import statistics
import sys


def median_ci(d, level=0.95):
    """A distribution-free confidence interval for the median of d (the sign test's order
    statistics: the widest k with P(Binomial(n, 1/2) < k) <= (1 - level) / 2)."""
    d, n = sorted(d), len(d)
    k, tail = 0, 0.0
    while True:
        p = math.comb(n, k) / 2**n
        if tail + p > (1 - level) / 2:
            break
        tail += p
        k += 1
    return (d[k - 1], d[n - k]) if k > 0 else (None, None)


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    rows, digits, unit, pairs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    runs = {}
    for line in open(rows):
        f = line.split()
        if len(f) >= 2:
            runs.setdefault(f[0], []).append(float(f[1]))
    for label, v in runs.items():
        print(f"{label:9s} median {statistics.median(v):8.{digits}f} {unit}")
    for pair in pairs:
        cuts = [i for i, c in enumerate(pair) if c == "-"]
        split = [(pair[:i], pair[i + 1:]) for i in cuts if pair[:i] in runs and pair[i + 1:] in runs]
        if not split:
            continue
        a, b = split[0]
        d = [x - y for x, y in zip(runs[a], runs[b])]
        lo, hi = median_ci(d)
        ci = (f"95% CI [{lo:+.{digits}f}, {hi:+.{digits}f}]" if lo is not None else
              "too few rounds for a 95% CI")
        ref = statistics.median(runs[b])
        print(f"{a} - {b}: median of the per-round differences {statistics.median(d):+.{digits}f} "
              f"{unit} ({100 * statistics.median(d) / ref:+.2f}% of {b}'s median), {ci}, "
              f"{len(d)} rounds")


if __name__ == "__main__":
    main()
