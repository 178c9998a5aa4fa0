#!/usr/bin/env python3
"""What profiling costs each of many short processes, measured one process at a time in turn:
one bench/spawn_serve.c server a configuration (natively, under perf record, under `sprofil
record`'s default, ...), all running at once, and this coordinator asks each server in a new
random order for one process at a time, N times. A change of the machine's speed (a VM's
neighbours, its frequency) then falls on every configuration alike, where runs of a whole loop
in turn (bench/spawn_ab.sh) leave it in their per-round differences: the difference between
record's default and perf record came out +7 us [-1, +16] from 3,000 processes each this way,
against -7 us [-73, +117] from 16 rounds of 300 in turn on the same VM.

Prints each configuration's median CPU a process, then for each configuration against the
first one the median of the per-process differences (process i of one against process i of
the other, asked within milliseconds of each other) with its distribution-free 95% interval
(bench/paired.py's), and the whole tree's CPU a process (the tool, its server and the
processes, from wait4 of the tool, divided by N: its start and end included).
Usage: bench/spawn_interleaved.py SERVE N CONFIG... -- CMD [ARGS...]
  SERVE   the built bench/spawn_serve.c (cc -O2 bench/spawn_serve.c -o spawn_serve)
  CONFIG  NAME=PREFIX, PREFIX the tool's words before the server, split as a shell would
          ("native=" for none; "perf=perf record -q -e task-clock -F 1000 -o /tmp/p.data --")"""
import os
import random
import shlex
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import median_ci  # noqa: E402


def interleave(serve, n, prefixes, cmd, seed=1):
    """Runs one server of cmd under each prefix (name -> argv before the server) and asks them
    for n processes each, one at a time in a random order each time. Returns name ->
    {"us": [CPU of process i, us], "tree_us": the tool's tree's CPU / n}."""
    servers = {}
    try:
        for name, prefix in prefixes.items():
            to_r, to_w = os.pipe()
            from_r, from_w = os.pipe()
            argv = list(prefix) + [serve, str(to_r), str(from_w)] + list(cmd)
            p = subprocess.Popen(argv, pass_fds=(to_r, from_w), stdout=subprocess.DEVNULL)
            os.close(to_r)
            os.close(from_w)
            servers[name] = {"proc": p, "w": to_w, "r": os.fdopen(from_r), "us": []}
        rng = random.Random(seed)
        for _ in range(n):
            order = list(servers)
            rng.shuffle(order)
            for name in order:
                s = servers[name]
                os.write(s["w"], b"x")
                line = s["r"].readline()
                if not line:
                    raise RuntimeError(f"{name}: its server ended: `{shlex.join(s['proc'].args)}`")
                s["us"].append(int(line))
    finally:
        for s in servers.values():
            os.close(s["w"])
    out = {}
    for name, s in servers.items():
        _, status, ru = os.wait4(s["proc"].pid, 0)
        s["r"].close()
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{name}: exit {os.waitstatus_to_exitcode(status)}")
        out[name] = {"us": s["us"], "tree_us": (ru.ru_utime + ru.ru_stime) * 1e6 / n}
    return out


def difference(a, b):
    """The median of the per-process differences a[i] - b[i] and its 95% interval."""
    d = [x - y for x, y in zip(a, b)]
    lo, hi = median_ci(d)
    return statistics.median(d), lo, hi


def main():
    if "--" not in sys.argv or sys.argv.index("--") < 4:
        sys.exit(__doc__)
    split = sys.argv.index("--")
    serve, n, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[split + 1:]
    prefixes = {}
    for c in sys.argv[3:split]:
        name, _, prefix = c.partition("=")
        prefixes[name] = shlex.split(prefix)
    got = interleave(serve, n, prefixes, cmd)
    print(f"{n} processes a configuration, asked one at a time in a random order; us of CPU a "
          "process")
    base = next(iter(got))
    for name, g in got.items():
        med = statistics.median(g["us"])
        line = f"{name:<12} median {med:8.1f} us, tree {g['tree_us']:8.1f} us"
        if name != base:
            d, lo, hi = difference(g["us"], got[base]["us"])
            line += (f"; - {base}: median difference {d:+.1f} us [{lo:+.1f}, {hi:+.1f}], ratio "
                     f"of medians {med / statistics.median(got[base]['us']):.3f}")
        print(line)


if __name__ == "__main__":
    main()
