"""Section "switch" of compare.py (goal 1 on a program whose threads switch often):
bench/pingpong.c, two threads passing a byte through pipes SW_N times (2 x SW_N switches),
pinned to CPU 0 with taskset (there the kernel can swap two threads' cloned perf contexts at a
switch instead of stopping and starting their events), natively, under perf record, under
`sprofil record`'s default (sampled from outside) and with `--agent`, the configurations in
turn each round, SW_ROUNDS rounds, at 1000 Hz. Two figures: the program's own CPU (its
getrusage, printed by pingpong) and the whole tree's (wait4 of the tool). Goal 1 is met when
both are at most perf record's (medians of the rounds). bench/switch_cost.sh is the same with
paired intervals. Environment (besides common.py's):
  SW_N       round trips a run (default 100000; QUICK 20000)
  SW_ROUNDS  rounds (default 8; QUICK 3)
"""
import os
import subprocess
import tempfile

from common import QUICK, ROOT, SPROFIL, WORK, against_perf, log, perf_configs, run, shown

N = int(os.environ.get("SW_N", "20000" if QUICK else "100000"))
ROUNDS = int(os.environ.get("SW_ROUNDS", "3" if QUICK else "8"))
SRC = os.path.join(ROOT, "bench", "pingpong.c")


def section():
    print("## Side by side: threads that switch often (goal 1)\n")
    prog = os.path.join(WORK, "pingpong")
    subprocess.run(["cc", "-O2", "-Wall", "-pthread", SRC, "-o", prog], check=True)
    cmd = ["taskset", "-c", "0", prog, str(N)]
    configs = {
        "native": cmd,
        **perf_configs(1000, os.path.join(WORK, "switch.data"), cmd),
        "sprofil record": [SPROFIL, "record", "-q", "-F", "1000", "-o",
                           os.path.join(WORK, "switch.sprof"), "--"] + cmd,
        "sprofil record --agent": [SPROFIL, "record", "--agent", "-q", "-F", "1000", "-o",
                                   os.path.join(WORK, "switch.sprof"), "--"] + cmd,
    }
    own = {c: [] for c in configs}
    tree = {c: [] for c in configs}
    for r in range(ROUNDS):
        log(f"switch: round {r + 1} of {ROUNDS}")
        for name, argv in configs.items():
            with tempfile.TemporaryFile(dir=WORK) as out:  # pingpong's "cpu_ms T" line
                _, cpu, _, _ = run(argv, stdout=out)
                out.seek(0)
                own[name].append(float(out.read().split()[1]))
            tree[name].append(cpu * 1000)
    print(f"`{shown(cmd)}` ({2 * N} switches on CPU 0), {ROUNDS} rounds, medians; ms of CPU\n")

    def what(name):
        if "--agent" in name:
            return ("record --agent (the agent in each process, drain mode) costs threads that "
                    "switch often no more than perf record at 1000 Hz (an option)")
        return ("record's default (agentless) costs threads that switch often no more than "
                "perf record at 1000 Hz")

    against_perf(configs, own, tree, 1, "", what)
