"""Section "spawn" of compare.py (goal 1 on short processes): cmp-burn4 --iters 1000 (about
0.9 ms of CPU) started SP_N times in turn by bench/spawn_cpu.c, natively, under perf record, under
`sprofil record`'s default (sampled from outside), with `--agent` (the agent in each process; the
run directory beside -o, in WORK) and with `--agent --scratch` on a tmpfs (/dev/shm, where it is
one), the configurations in turn each round, SP_ROUNDS rounds. Two figures
a process: the program's own CPU (spawn_cpu's median of wait4) and the whole tree's (the tool,
spawn_cpu and every process, from wait4 of the top process, divided by SP_N: the tools' own
start and end included). Goal 1 is met when both are at most perf record's (medians of the
rounds). bench/spawn_floor.sh adds the loader's part (an empty preload, the idle agent) and the
paired intervals. Environment (besides common.py's):
  SP_N       processes a round (default 300; QUICK 100)
  SP_ROUNDS  rounds (default 24; QUICK 3): a round's ratio of record's default to perf record
             spread over 0.90-1.19 in 8 rounds at 9350132, so the medians of 8 fell on either side
             of 1 from run to run
"""
import os
import subprocess
import tempfile

from common import (BIN, QUICK, ROOT, SPROFIL, WORK, against_perf, log, perf_configs, run,
                    shown)

N = int(os.environ.get("SP_N", "100" if QUICK else "300"))
ROUNDS = int(os.environ.get("SP_ROUNDS", "3" if QUICK else "24"))
SPAWN_SRC = os.path.join(ROOT, "bench", "spawn_cpu.c")


def tmpfs_dir():
    """A private directory on /dev/shm where that is a tmpfs, else None."""
    try:
        with open("/proc/mounts") as f:
            if any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in f):
                return tempfile.mkdtemp(prefix="sprofil-spawn.", dir="/dev/shm")
    except OSError:
        pass
    return None


def section():
    print("## Side by side: short processes (goal 1)\n")
    spawn = os.path.join(WORK, "spawn_cpu")
    subprocess.run(["cc", "-O2", "-Wall", SPAWN_SRC, "-o", spawn], check=True)
    burn = [os.path.join(BIN, "cmp-burn4"), "--iters", "1000"]
    shm = tmpfs_dir()
    configs = {
        "native": lambda: [spawn, "native", str(N)] + burn,
        **{name: (lambda a=argv: a) for name, argv in perf_configs(
            1000, os.path.join(WORK, "spawn.data"), [spawn, "perf", str(N)] + burn).items()},
        "sprofil record": lambda: [SPROFIL, "record", "-q", "-F", "1000", "-o",
                                   os.path.join(WORK, "spawn.sprof"), "--", spawn, "outside",
                                   str(N)] + burn,
        "sprofil record --agent": lambda: [SPROFIL, "record", "--agent", "-q", "-F", "1000",
                                           "-o", os.path.join(WORK, "spawn.sprof"), "--", spawn,
                                           "drain", str(N)] + burn,
    }
    if shm:
        configs["sprofil record --agent --scratch (tmpfs)"] = lambda: [
            SPROFIL, "record", "--agent", "-q", "-F", "1000", "--scratch", shm, "-o",
            os.path.join(WORK, "spawn.sprof"), "--", spawn, "drain", str(N)] + burn
    own = {c: [] for c in configs}
    tree = {c: [] for c in configs}
    try:
        for r in range(ROUNDS):
            log(f"spawn: round {r + 1} of {ROUNDS}")
            for name, argv in configs.items():
                # spawn_cpu's line ("LABEL MS ms F faults") into a file; run(): the tree's CPU
                with tempfile.TemporaryFile(dir=WORK) as line:
                    _, cpu, _, _ = run(argv(), stdout=line)
                    line.seek(0)
                    own[name].append(float(line.read().split()[1]))
                tree[name].append(cpu * 1000 / N)
    finally:
        if shm:
            subprocess.run(["rm", "-rf", shm])
    print(f"cmp-burn4 --iters 1000 spawned {N} times a round by bench/spawn_cpu.c, {ROUNDS} "
          "rounds, medians; ms of CPU a process\n")

    def what(name):
        if "--agent" not in name:
            return ("record's default (agentless) costs a short process no more than perf "
                    "record at 1000 Hz")
        return ("record --agent (the agent in each process, drain mode) costs a short process "
                "no more than perf record at 1000 Hz (an option)" +
                (", with --scratch on a tmpfs" if "scratch" in name else ""))

    against_perf({c: argv() for c, argv in configs.items()}, own, tree, 3, " a process", what)
