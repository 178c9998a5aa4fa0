#!/usr/bin/env python3
"""A profiler's own CPU for each short process it profiles: bench/spawn_cpu.c runs CMD N times
in turn under each configuration (rounds in turn), and the tool's CPU is its whole tree's (wait4
of the tool) less the processes' (summed by spawn_cpu, SPAWN_TOTALS=1) and spawn_cpu's own.
Prints each configuration's medians a process over the rounds: the tree, the processes, and
the tool (its start and end included, divided by N).
Usage: bench/tool_cpu.py SPAWN N ROUNDS CONFIG... -- CMD [ARGS...]
  SPAWN   the built bench/spawn_cpu.c (cc -O2 bench/spawn_cpu.c -o spawn_cpu)
  CONFIG  NAME=PREFIX, PREFIX the tool's words before spawn_cpu, split as a shell would
          ("perf=perf record -q -e task-clock -F 1000 -o /tmp/p.data --")"""
import os
import shlex
import statistics
import subprocess
import sys


def main():
    if "--" not in sys.argv or len(sys.argv) < 6:
        sys.exit(__doc__)
    cut = sys.argv.index("--")
    spawn, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    configs = dict(c.split("=", 1) for c in sys.argv[4:cut])
    cmd = sys.argv[cut + 1:]
    env = dict(os.environ, SPAWN_TOTALS="1")
    got = {name: [] for name in configs}
    for _ in range(rounds):
        for name, prefix in configs.items():
            p = subprocess.Popen(shlex.split(prefix) + [spawn, name, str(n)] + cmd, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            err = p.stderr.read()
            _, status, ru = os.wait4(p.pid, 0)
            if status != 0:
                sys.exit(f"{name}: exit status {status}: {err}")
            totals = [line.split() for line in err.splitlines() if line.startswith("TOTALS ")]
            procs, own = float(totals[-1][1]), float(totals[-1][2])
            tree = (ru.ru_utime + ru.ru_stime) * 1000
            got[name].append((tree / n, procs / n, (tree - procs - own) / n * 1000))
    print(f"{n} processes a round, {rounds} rounds; medians a process")
    print("| configuration | tree (ms) | the processes (ms) | the tool (us) |")
    print("| --- | ---: | ---: | ---: |")
    for name, rows in got.items():
        tree, procs, tool = (statistics.median(r[i] for r in rows) for i in range(3))
        print(f"| {name} | {tree:.3f} | {procs:.3f} | {tool:.1f} |")


if __name__ == "__main__":
    main()
