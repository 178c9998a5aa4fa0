"""Section "scale" of compare.py (goal 5): `sprofil record` (its default clock) with
64 threads on the machine's cores against 1 thread doing the same work, the per-sample cost
and delivered rate with OBJECTS shared objects loaded against few, and the start-up and
dlopen time record's default adds with OBJECTS objects. The small workloads (scale_*.c) are compiled
with cc into WORK/scale. Environment (besides common.py's):
  SCALE_RUNS    rounds, each a run of the native program and of every configuration in turn
                (default 5; QUICK 1); medians are reported
  OBJECTS       shared objects linked in (DT_NEEDED) and dlopen'd (default 5000; QUICK 1000)
  SCALE_CLOCKS  comma-separated record clocks (default auto: record's default)
  SCALE_ITERS   loop iterations of each workload (default 400000000, about 1 s of CPU)
"""
import os
import re
import shutil
import subprocess

from common import QUICK, SPROFIL, WORK, goal, log, med, record_argv, rel, run, shown

HERE = os.path.dirname(os.path.abspath(__file__))
SWORK = os.path.join(WORK, "scale")
RUNS = int(os.environ.get("SCALE_RUNS", "1" if QUICK else "5"))
OBJECTS = int(os.environ.get("OBJECTS", "1000" if QUICK else "5000"))
CLOCKS = os.environ.get("SCALE_CLOCKS", "auto").split(",")
RATES = [1000, 10000]
ITERS = int(os.environ.get("SCALE_ITERS", "400000000"))
# Goal 5's "keep": the rate within 5%, the per-sample cost at 10 kHz within 25% + 2 us (this
# VM's run-to-run noise at 10 kHz: see docs/benchmarks.md).
RATE_KEPT, COST_KEPT, COST_SLACK_US = 0.95, 1.25, 2.0


def srun(argv):
    return run(argv, cwd=SWORK)


SUMMARY = re.compile(r"(\d+) samples \((\S+) clock")


def samples_of(stderr):
    m = SUMMARY.search(stderr)
    if not m:
        raise RuntimeError("no summary line in: " + stderr[-500:])
    return int(m.group(1)), m.group(2)


def build():
    os.makedirs(SWORK, exist_ok=True)
    cc = ["cc", "-O2", "-g"]
    exe = os.path.join(SWORK, "scale-threads")
    subprocess.check_call(cc + ["-pthread", os.path.join(HERE, "scale_threads.c"), "-o", exe])
    obj = os.path.join(SWORK, "obj.so")
    subprocess.check_call(cc + ["-O1", "-shared", "-fPIC", os.path.join(HERE, "scale_obj.c"),
                                "-o", obj])
    for sub, prefix in (("libs", "libobj"), ("dl", "libdl")):
        d = os.path.join(SWORK, sub)
        os.makedirs(d, exist_ok=True)
        for k in range(OBJECTS):
            path = os.path.join(d, f"{prefix}{k:05d}.so")
            if not os.path.exists(path):
                shutil.copyfile(obj, path)  # distinct files: the loader maps each one
    libs = os.path.join(SWORK, "libs")
    rsp = os.path.join(SWORK, "libs.rsp")
    with open(rsp, "w") as f:
        f.write(" ".join(f"-l:libobj{k:05d}.so" for k in range(OBJECTS)))
    src = os.path.join(HERE, "scale_objects.c")
    many = os.path.join(SWORK, f"scale-objects-{OBJECTS}")
    subprocess.check_call(cc + [src, "-o", many, "-L", libs, "-Wl,--no-as-needed", "@" + rsp,
                                "-Wl,-rpath," + libs, "-ldl"])
    few = os.path.join(SWORK, "scale-objects-few")
    subprocess.check_call(cc + [src, "-o", few, "-ldl"])
    return exe, many, few


def configs(out):
    return [(f"record --clock {c} -F {hz}", hz,
             lambda cmd, c=c, hz=hz: record_argv(out, hz, cmd, c)) for c in CLOCKS for hz in RATES]


ROW_HEAD = ("| record | clock used | Hz | CPU s (median) | x native | samples / CPU s | "
            "per-sample cost (us) |\n|---|---|---|---|---|---|---|")


class Series:
    """One configuration's runs, a value per round: CPU, samples per CPU second, per-sample
    cost (us); and the clock it used."""

    def __init__(self):
        self.cpus, self.rates, self.costs, self.used = [], [], [], ""


def round_robin(cfgs, native, measure):
    """RUNS rounds, each a run of the native program (native(): its figures) and then of every
    configuration in turn (measure(make, the round's native figures): cpu, rate, cost, clock
    used), so that each run is against the same round's native one and the VM's drift over a
    section does not pass for a cost. Returns ([native figures per round], {label: Series})."""
    natives, got = [], {label: Series() for label, _, _ in cfgs}
    for _ in range(RUNS):
        nat = native()
        natives.append(nat)
        for label, _, make in cfgs:
            s = got[label]
            cpu, rate, cost, s.used = measure(make, nat)
            s.cpus.append(cpu)
            s.rates.append(rate)
            s.costs.append(cost)
    return natives, got


def rows(title, head, cfgs, got, native):
    """Prints the table of every configuration's medians (CPU also as a ratio to `native`);
    returns {(label, hz): (rate, cost us)}."""
    print(head)
    res = {}
    for label, hz, _ in cfgs:
        s = got[label]
        print(f"| `{label}` | {s.used} | {hz} | {med(s.cpus):.3f} | {med(s.cpus) / native:.3f} | "
              f"{med(s.rates):.0f} | {med(s.costs):.2f} |")
        log(f"  {title}: {label}: {med(s.cpus):.3f} s")
        res[(label, hz)] = (med(s.rates), med(s.costs))
    print()
    return res


def overhead_table(title, cmd_native, cfgs, idle_arg):
    """The workload as given and with idle_arg replacing its last argument (no work: what
    start-up and the tool cost); the per-sample cost is the extra CPU of the work under the
    profiler over its samples: ((rec - rec_idle) - (native - native_idle)) / samples, each
    round's runs against the same round's native ones. Returns {(label, hz): (rate, cost us)}."""
    print(f"### {title}\n")
    idle_native = cmd_native[:-1] + [idle_arg]

    def measure(make, nat):
        b, b0 = nat
        r0 = srun(make(idle_native))[1]
        _, cpu, err, _ = srun(make(cmd_native))
        n, used = samples_of(err)
        return (cpu, n / (cpu - r0) if cpu > r0 else 0,
                ((cpu - r0) - (b - b0)) / n * 1e6 if n else float("nan"), used)

    natives, got = round_robin(cfgs, lambda: (srun(cmd_native)[1], srun(idle_native)[1]),
                               measure)
    b = med([x[0] for x in natives])
    print(f"Native: `{shown(cmd_native)}`, median process-tree CPU {b:.3f} s ({RUNS} "
          f"runs, in turn with the rows'); {med([x[1] for x in natives]):.3f} s with "
          f"`{idle_arg}` as the last argument (no work).\n")
    return rows(title, ROW_HEAD, cfgs, got, b)


WORK_CPU = re.compile(r"work_cpu_s ([0-9.]+)")


def work_table(title, cmd_native, cfgs, out):
    """The work phase alone (the program measures its own CPU around it, so the loader's time
    with thousands of objects does not blur it): samples in scale_main_work per CPU second of
    the phase, and the phase's extra CPU per sample against the same round's native run.
    Returns {(label, hz): (rate, cost us)}."""
    print(f"### {title}\n")

    def measure(make, b):
        _, _, err, _ = srun(make(cmd_native))
        cpu = float(WORK_CPU.search(err).group(1))
        _, used = samples_of(err)
        csv = subprocess.run([SPROFIL, "report", "--format", "csv", out], cwd=SWORK,
                             capture_output=True, text=True).stdout
        n = sum(float(l.split(",")[0]) for l in csv.splitlines()[1:] if "scale_main_work" in l)
        return cpu, n / cpu if cpu else 0, (cpu - b) / n * 1e6 if n else float("nan"), used

    natives, got = round_robin(
        cfgs, lambda: float(WORK_CPU.search(srun(cmd_native)[2]).group(1)), measure)
    print(f"Native: `{shown(cmd_native)}`, work phase {med(natives):.3f} s of process CPU (median "
          f"of {RUNS}, in turn with the rows').\n")
    return rows(title, ROW_HEAD.replace("CPU s (median)", "work CPU s (median)"), cfgs, got,
                med(natives))


def wall_table(title, rows):
    """rows: (label, cmd). Prints median wall time and the ratio to the first row; returns the
    medians."""
    print(f"### {title}\n")
    print("| run | command | wall s (median) | x first row |")
    print("|---|---|---|---|")
    first, walls = None, []
    for label, cmd in rows:
        w = med([srun(cmd)[0] for _ in range(RUNS)])
        first = first or w
        walls.append(w)
        print(f"| {label} | `{shown(cmd)}` | {w:.3f} | {w / first:.2f} |")
        log(f"  {title}: {label}: {w:.3f} s")
    print()
    return walls


def kept(label, base, scaled, command):
    """Goal-5 rows: the delivered rate of `scaled` against `base` at every rate, and the
    per-sample cost at the highest (at 1 kHz the cost is within this VM's noise). The rate is
    judged against the base's, or the rate asked where the base delivered more: the perf
    clock's periods are task-clock time, which counts the time the hypervisor steals, and CPU
    seconds do not, so a run with more steal delivers more samples per CPU second than asked."""
    for (cfg, hz), (rate, cost) in scaled.items():
        brate, bcost = base[(cfg, hz)]
        ref = min(brate, hz)
        fig = (f"{rate:.0f} vs {brate:.0f} samples/CPU s, {hz} asked ({rate / ref:.3f}x of "
               f"{ref:.0f}; kept if >= {RATE_KEPT})")
        ok = rate >= RATE_KEPT * ref
        if hz == max(RATES):
            fig += (f"; {cost:.2f} vs {bcost:.2f} us per sample (kept if <= {COST_KEPT} x + "
                    f"{COST_SLACK_US:g} us)")
            ok = ok and cost <= COST_KEPT * max(bcost, 0) + COST_SLACK_US
        else:
            fig += f"; per-sample cost {cost:.2f} vs {bcost:.2f} us (noise at this rate)"
        goal(5, f"{label}: {'rate and per-sample cost' if hz == max(RATES) else 'rate'} kept, "
                f"`{cfg}`", fig, ok, command)


def section():
    print("## Scale: 64 threads, many shared objects (goal 5)\n")
    exe, many, few = build()
    out = os.path.join(SWORK, "p.sprof")
    print(f"{os.cpu_count()} CPUs. SCALE_RUNS={RUNS}, OBJECTS={OBJECTS}, SCALE_ITERS={ITERS}; "
          f"the workloads are compiled into {SWORK}. *per-sample cost* is the extra CPU of the "
          "work under the profiler over its samples; at 1 kHz it is within this VM's noise "
          "(a few percent of ~1 s), at 10 kHz a few microseconds.\n")
    cfgs = configs(out)
    threads = {}
    for n in (1, 64):
        cmd = [exe, str(n), str(ITERS // n)]
        threads[n] = overhead_table(f"{n} thread{'s' if n > 1 else ''} on {os.cpu_count()} "
                                    f"cores (`scale-threads {n} {ITERS // n}`)", cmd, cfgs, "0")
    kept(f"64 threads on {os.cpu_count()} cores vs 1", threads[1], threads[64],
         shown(record_argv("P", "HZ", [exe, "64", str(ITERS // 64)])))
    objs = {}
    for label, prog in (("few objects", few), (f"{OBJECTS} objects", many)):
        cmd = [prog, "--iters", str(ITERS)]
        objs[label] = work_table(f"Sampling with {label} loaded (`{os.path.basename(prog)} "
                                 f"--iters {ITERS}`, its work phase)", cmd, cfgs, out)
    kept(f"{OBJECTS} shared objects vs few", objs["few objects"], objs[f"{OBJECTS} objects"],
         shown(record_argv("P", "HZ", [many, "--iters", str(ITERS)])))
    walls = wall_table(f"Start-up with {OBJECTS} linked objects (main returns at once)", [
        ("native", [many]),
        ("record", record_argv(out, 1000, [many])),
        ("native, few objects", [few]),
        ("record, few objects", record_argv(out, 1000, [few])),
    ])
    goal(5, f"start-up time record's default adds with {OBJECTS} linked objects (measured)",
         f"{walls[1] - walls[0]:.2f} s ({walls[1] / walls[0]:.2f}x native's {walls[0]:.2f} s); "
         f"few objects: {walls[3] - walls[2]:.3f} s", "measured",
         shown(record_argv("P", 1000, [many])))
    dl = os.path.join(SWORK, "dl")
    walls = wall_table(f"dlopen of {OBJECTS} objects at run time (each called once)", [
        ("native", [few, "--dlopen", dl, str(OBJECTS)]),
        ("record", record_argv(out, 1000, [few, "--dlopen", dl, str(OBJECTS)])),
    ])
    goal(5, f"time record's default adds to {OBJECTS} dlopens (measured)",
         f"{walls[1] - walls[0]:.2f} s ({walls[1] / walls[0]:.1f}x native's {walls[0]:.2f} s)",
         "measured", shown(record_argv("P", 1000, [few, "--dlopen", rel(dl), str(OBJECTS)])))
