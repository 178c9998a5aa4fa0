#!/usr/bin/env python3
"""Scale benchmarks of `sprofil record` (driven by bench/scale/run.sh): many threads on few
cores, and a program with thousands of shared objects.

Prints markdown on stdout, progress on stderr; every table names its commands. Environment:
  BUILD   build directory holding bin/sprofil and lib/ (default build)
  WORK    scratch directory (default /tmp/sprofil-scale)
  RUNS    runs per configuration (default 5); medians are reported
  OBJECTS shared objects linked in (DT_NEEDED) and dlopen'd (default 5000 each)
  CLOCKS  comma-separated record clocks (default auto,cpu)
  ITERS   loop iterations of each workload (default 400000000, about 1 s of CPU)
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("BUILD", "build")
SPROFIL = os.path.join(ROOT, BUILD, "bin", "sprofil")
WORK = os.environ.get("WORK", "/tmp/sprofil-scale")
RUNS = int(os.environ.get("RUNS", "5"))
OBJECTS = int(os.environ.get("OBJECTS", "5000"))
CLOCKS = os.environ.get("CLOCKS", "auto,cpu").split(",")
RATES = [1000, 10000]
ITERS = int(os.environ.get("ITERS", "400000000"))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def med(v):
    return statistics.median(v) if v else float("nan")


def run(argv, env=None):
    """Runs argv in WORK; returns (wall s, CPU s of the process tree, stderr)."""
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         cwd=WORK)
    err = p.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv} failed: {err[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime, err


def record_argv(clock, hz, out, cmd):
    return [SPROFIL, "record", "--clock", clock, "-F", str(hz), "-o", out, "--"] + cmd


SUMMARY = re.compile(r"(\d+) samples \((\S+) clock")


def samples_of(stderr):
    m = SUMMARY.search(stderr)
    if not m:
        raise RuntimeError("no summary line in: " + stderr[-500:])
    return int(m.group(1)), m.group(2)


def build():
    os.makedirs(WORK, exist_ok=True)
    cc = ["cc", "-O2", "-g"]
    exe = os.path.join(WORK, "scale-threads")
    subprocess.check_call(cc + ["-pthread", os.path.join(HERE, "threads.c"), "-o", exe])
    obj = os.path.join(WORK, "obj.so")
    subprocess.check_call(cc + ["-O1", "-shared", "-fPIC", os.path.join(HERE, "obj.c"), "-o", obj])
    for sub, prefix in (("libs", "libobj"), ("dl", "libdl")):
        d = os.path.join(WORK, sub)
        os.makedirs(d, exist_ok=True)
        for k in range(OBJECTS):
            path = os.path.join(d, f"{prefix}{k:05d}.so")
            if not os.path.exists(path):
                shutil.copyfile(obj, path)  # distinct files: the loader maps each one
    libs = os.path.join(WORK, "libs")
    rsp = os.path.join(WORK, "libs.rsp")
    with open(rsp, "w") as f:
        f.write(" ".join(f"-l:libobj{k:05d}.so" for k in range(OBJECTS)))
    src = os.path.join(HERE, "objects.c")
    many = os.path.join(WORK, "scale-objects")
    subprocess.check_call(cc + [src, "-o", many, "-L", libs, "-Wl,--no-as-needed", "@" + rsp,
                                "-Wl,-rpath," + libs, "-ldl"])
    few = os.path.join(WORK, "scale-objects-few")
    subprocess.check_call(cc + [src, "-o", few, "-ldl"])
    return exe, many, few


def overhead_table(title, cmd_native, configs, idle_arg):
    """configs: (label, clock, hz, argv builder taking the workload's command). The workload
    runs as given and with idle_arg replacing its last argument (no work: what start-up and
    the tool cost); the per-sample cost is the extra CPU of the work under the profiler
    divided by its samples: ((rec - rec_idle) - (native - native_idle)) / samples."""
    print(f"### {title}\n")
    idle_native = cmd_native[:-1] + [idle_arg]
    b = med([run(cmd_native)[1] for _ in range(RUNS)])
    b0 = med([run(idle_native)[1] for _ in range(RUNS)])
    shown = " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd_native)
    print(f"Native: `{shown}`, median process-tree CPU {b:.3f} s ({RUNS} runs); "
          f"{b0:.3f} s with `{idle_arg}` as the last argument (no work).\n")
    print("| record | clock used | Hz | CPU s (median) | x native | samples / CPU s of the work | "
          "per-sample cost (µs) |")
    print("|---|---|---|---|---|---|---|")
    for label, clock, hz, make in configs:
        r0 = med([run(make(idle_native))[1] for _ in range(RUNS)])
        cpus, rates, costs, used = [], [], [], ""
        for _ in range(RUNS):
            _, cpu, err = run(make(cmd_native))
            n, used = samples_of(err)
            cpus.append(cpu)
            rates.append(n / (cpu - r0) if cpu > r0 else 0)
            costs.append(((cpu - r0) - (b - b0)) / n * 1e6 if n else float("nan"))
        print(f"| `{label}` | {used} | {hz} | {med(cpus):.3f} | {med(cpus) / b:.3f} | "
              f"{med(rates):.0f} | {med(costs):.2f} |")
        log(f"  {title}: {label}: {med(cpus):.3f} s")
    print()


WORK_CPU = re.compile(r"work_cpu_s ([0-9.]+)")


def work_table(title, cmd_native, configs, out):
    """The work phase alone (the program measures its own CPU around it, so the loader's time
    with thousands of objects does not blur it): samples in scale_main_work per CPU second of
    the phase, and the phase's extra CPU per sample."""
    print(f"### {title}\n")
    b = med([float(WORK_CPU.search(run(cmd_native)[2]).group(1)) for _ in range(RUNS)])
    shown = " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd_native)
    print(f"Native: `{shown}`, work phase {b:.3f} s of process CPU (median of {RUNS}).\n")
    print("| record | clock used | Hz | work CPU s (median) | x native | samples in the work / "
          "its CPU s | per-sample cost (µs) |")
    print("|---|---|---|---|---|---|---|")
    for label, clock, hz, make in configs:
        cpus, rates, costs, used = [], [], [], ""
        for _ in range(RUNS):
            _, _, err = run(make(cmd_native))
            cpu = float(WORK_CPU.search(err).group(1))
            _, used = samples_of(err)
            csv = subprocess.run([SPROFIL, "report", "--format", "csv", out], cwd=WORK,
                                 capture_output=True, text=True).stdout
            n = sum(float(l.split(",")[0]) for l in csv.splitlines()[1:]
                    if "scale_main_work" in l)
            cpus.append(cpu)
            rates.append(n / cpu if cpu else 0)
            costs.append((cpu - b) / n * 1e6 if n else float("nan"))
        print(f"| `{label}` | {used} | {hz} | {med(cpus):.3f} | {med(cpus) / b:.3f} | "
              f"{med(rates):.0f} | {med(costs):.2f} |")
        log(f"  {title}: {label}: {med(cpus):.3f} s")
    print()


def wall_table(title, rows):
    """rows: (label, cmd, env). Prints median wall time and the ratio to the first row."""
    print(f"### {title}\n")
    print("| run | command | wall s (median) | x first row |")
    print("|---|---|---|---|")
    first = None
    for label, cmd in rows:
        w = med([run(cmd)[0] for _ in range(RUNS)])
        first = first or w
        shown = " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd)
        print(f"| {label} | `{shown}` | {w:.3f} | {w / first:.2f} |")
        log(f"  {title}: {label}: {w:.3f} s")
    print()


def configs(out):
    return [(f"record --clock {c} -F {hz}", c, hz,
             lambda cmd, c=c, hz=hz: record_argv(c, hz, out, cmd))
            for c in CLOCKS for hz in RATES]


def main():
    if not os.access(SPROFIL, os.X_OK):
        sys.exit(f"{SPROFIL}: build sprofil_tool and sprofil first")
    exe, many, few = build()
    out = os.path.join(WORK, "p.sprof")
    print(f"Machine: {os.cpu_count()} CPUs; load average at start "
          f"{os.getloadavg()[0]:.2f}. RUNS={RUNS}, OBJECTS={OBJECTS}. Command: "
          f"`bench/scale/run.sh` (WORK={WORK}).\n")
    # 64 threads against 1 thread doing the same total work.
    total = ITERS
    for n in (1, 64):
        cmd = [exe, str(n), str(total // n)]
        overhead_table(f"{n} thread{'s' if n > 1 else ''} on {os.cpu_count()} cores "
                       f"(`scale-threads {n} {total // n}`)", cmd, configs(out), "0")
    # Many objects: samples looked up among OBJECTS + a few regions, against the same program
    # without them; the work phase alone.
    for label, prog in (("few objects", few), (f"{OBJECTS} objects", many)):
        cmd = [prog, "--iters", str(ITERS)]
        work_table(f"Sampling with {label} loaded (`{os.path.basename(prog)} --iters {ITERS}`, "
                   "its work phase)", cmd, configs(out), out)
    # Start-up: the loader maps OBJECTS objects, the agent scans them.
    wall_table(f"Start-up with {OBJECTS} linked objects (main returns at once)", [
        ("native", [many]),
        ("record (auto)", record_argv("auto", 1000, out, [many])),
        ("native, few objects", [few]),
        ("record (auto), few objects", record_argv("auto", 1000, out, [few])),
    ])
    dl = os.path.join(WORK, "dl")
    wall_table(f"dlopen of {OBJECTS} objects at run time (each called once)", [
        ("native", [few, "--dlopen", dl, str(OBJECTS)]),
        ("record (auto)", record_argv("auto", 1000, out, [few, "--dlopen", dl, str(OBJECTS)])),
    ])


if __name__ == "__main__":
    main()
