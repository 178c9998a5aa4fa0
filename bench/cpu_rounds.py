#!/usr/bin/env python3
"""One run of a command's CPU under each of several tools, in paired rounds: each round runs
every configuration once, in a new random order, and the program's own CPU is bench/spawn_cpu.c's
(one process: `spawn_cpu NAME 1 CMD`, wait4's user + system time). Prints each
configuration's median, and its per-round differences from the first configuration's with their
distribution-free 95% interval (bench/paired.py).
Usage: bench/cpu_rounds.py SPAWN ROUNDS CONFIG... -- CMD [ARGS...]
  SPAWN   the built bench/spawn_cpu.c (cc -O2 bench/spawn_cpu.c -o spawn_cpu)
  CONFIG  NAME=PREFIX, PREFIX the tool's words before spawn_cpu, split as a shell would
          ("perf=perf record -q -e task-clock -F 10000 -o /tmp/p.data --")"""
import os
import random
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import median_ci  # noqa: E402


def main():
    if "--" not in sys.argv or len(sys.argv) < 5:
        sys.exit(__doc__)
    cut = sys.argv.index("--")
    spawn, rounds = sys.argv[1], int(sys.argv[2])
    configs = dict(c.split("=", 1) for c in sys.argv[3:cut])
    cmd = sys.argv[cut + 1:]
    got = {name: [] for name in configs}
    for _ in range(rounds):
        order = list(configs)
        random.shuffle(order)
        for name in order:
            out = subprocess.run(shlex.split(configs[name]) + [spawn, "x", "1"] + cmd, check=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            got[name].append(float(out.stdout.split()[-4]))
    first = next(iter(configs))
    print(f"{rounds} rounds; ms of the program's CPU, medians; differences from {first}'s")
    for name, ms in got.items():
        line = f"{name}: {statistics.median(ms):.1f} ms"
        if name != first:
            d = [a - b for a, b in zip(ms, got[first])]
            lo, hi = median_ci(d)
            line += f", {statistics.median(d):+.1f} ms [{lo:+.1f}, {hi:+.1f}]"
        print(line)


if __name__ == "__main__":
    main()
