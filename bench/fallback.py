#!/usr/bin/env python3
"""The no-perf fallback's cost (issue 10, goal 3): process CPU of contend_workload (1:1 split,
SECONDS of CPU) natively and under `sprofil record --clock cpu|sampler` at 1 kHz and 10 kHz,
interleaved round robin, ROUNDS rounds; medians. Tree CPU is user + system time of the whole
tree from wait4 (the tool's own CPU is in it, the same for every clock); samples are the
profile's weighted total (docs/benchmarks.md, "The no-perf fallback").

usage: bench/fallback.py BUILD_DIR [ROUNDS] [SECONDS]"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

build = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
secs = sys.argv[3] if len(sys.argv) > 3 else "2"
tool = os.path.join(build, "bin", "sprofil")
work = os.path.join(build, "bin", "contend_workload")
tmp = tempfile.mkdtemp(prefix="sprofil-fallback-")
configs = [("baseline", None, 0)] + [(c, c, hz) for hz in (1000, 10000) for c in ("cpu", "sampler")]


def run(cfg):
    name, clock, hz = cfg
    truth = os.path.join(tmp, "truth")
    cmd = [work, "15", "15", secs, truth]
    prof = os.path.join(tmp, "p.sprof")
    if clock:
        cmd = [tool, "record", "--clock", clock, "-F", str(hz), "-o", prof, "--"] + cmd
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    assert status == 0, (cmd, status)
    samples = 0
    if clock:
        j = json.loads(subprocess.run([tool, "report", "--format", "json", prof],
                                      capture_output=True, text=True, check=True).stdout)
        samples = sum(r["samples"] for r in j["rows"])
    return ru.ru_utime + ru.ru_stime, wall, samples


res = {c[0] + str(c[2]): [] for c in configs}
for _ in range(rounds):
    for c in configs:
        res[c[0] + str(c[2])].append(run(c))
base = statistics.median(x[0] for x in res["baseline0"])
print(f"| clock | Hz | tree CPU s | x baseline | added CPU ms | samples | samples/CPU s |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for c in configs:
    k = c[0] + str(c[2])
    cpu = statistics.median(x[0] for x in res[k])
    smp = statistics.median(x[2] for x in res[k])
    print(f"| {c[0]} | {c[2] or '-'} | {cpu:.3f} | {cpu / base:.3f} | {1000 * (cpu - base):.0f} "
          f"| {smp:.0f} | {smp / cpu if smp else 0:.0f} |")
