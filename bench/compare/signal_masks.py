"""Section "coverage" of compare.py (goal 4): every thread is sampled whatever its
signal mask, in record's default mode. Coverage = samples x period / CPU time:
  - cmp-drain-blocked (tests/agent/drain_blocked.cpp): blocks every signal before it creates
    two workers, as `xz -T2` does (libc: pthread_sigmask; raw: the rt_sigprocmask system call,
    behind any interposer's back); CPU = the workers' thread clocks (its "worker_cpu_ns");
  - a cgo Go program (tests/agent/drain_cgo/main.go: the Go runtime handles every signal and
    makes its threads with pthread_create), built here with `go` when installed; CPU = the
    process's (its "cpu_ns").
The same checks are tests/agent/drain_test.cpp's Drain/BlockedSignals and
Drain.CgoGoProgramIsSampled. Environment: COV_SECONDS (each worker's CPU, default 0.4), COV_RUNS
(default 3; QUICK 1).
"""
import os
import re
import shutil
import subprocess

from common import BIN, QUICK, ROOT, WORK, goal, log, med, record_argv, report_rows, shown

SECONDS = os.environ.get("COV_SECONDS", "0.4")
RUNS = int(os.environ.get("COV_RUNS", "1" if QUICK else "3"))
HZ = 1000
MIN_COVERAGE = 0.9


def value_of(text, key):
    m = re.search(rf"^{key} (\d+)", text, re.M)
    if not m:
        raise RuntimeError(f"no {key} in: {text[-500:]}")
    return int(m.group(1))


def build_go():
    """The cgo program, or None (and why) when go is not installed or fails."""
    go = shutil.which("go")
    if not go:
        return None, "go is not installed (golang-go)"
    gowork = os.path.join(WORK, "go")
    os.makedirs(gowork, exist_ok=True)
    exe = os.path.join(gowork, "cgo_burn")
    env = dict(os.environ, GOFLAGS="-mod=mod", GOCACHE=os.path.join(gowork, "cache"),
               GOPATH=os.path.join(gowork, "gopath"), CGO_ENABLED="1", GO111MODULE="off")
    b = subprocess.run([go, "build", "-o", exe, "main.go"], env=env, capture_output=True,
                       text=True, cwd=os.path.join(ROOT, "tests", "agent", "drain_cgo"))
    if b.returncode != 0:
        return None, "go build failed: " + b.stderr.strip()[-200:]
    return exe, ""


def measure(argv, cpu_key, out_path):
    """Median coverage over RUNS runs of record's default mode, and the last run's numbers."""
    covs, last = [], None
    rec = record_argv(out_path, HZ, argv)
    for _ in range(RUNS):
        p = subprocess.run(rec, capture_output=True, text=True, cwd=WORK, timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"{rec} failed: {p.stderr[-1000:]}")
        cpu_s = value_of(p.stdout, cpu_key) / 1e9
        samples = sum(report_rows(out_path).values())
        covs.append(samples / HZ / cpu_s)
        last = (samples, cpu_s)
    return med(covs), last, rec


def section():
    print("## Every thread sampled whatever its signal mask (goal 4)\n")
    print(f"`sprofil record -F {HZ}` with no other option (drain mode with perf events); "
          f"coverage = samples x 1 ms / CPU time, median of {RUNS} run(s); goal: >= "
          f"{MIN_COVERAGE:.0%}.\n")
    print("| program | CPU s (last run) | samples (last run) | coverage (median) | command |")
    print("| --- | ---: | ---: | ---: | --- |")
    out = os.path.join(WORK, "cov.sprof")
    rows = []
    for mode in ("libc", "raw"):
        log(f"coverage: drain_blocked {mode}")
        cov, (n, cpu), rec = measure([os.path.join(BIN, "cmp-drain-blocked"), mode, SECONDS],
                                     "worker_cpu_ns", out)
        rows.append((f"workers blocking every signal ({mode})", cov, n, cpu, shown(rec)))
    exe, why = build_go()
    if exe:
        log("coverage: cgo")
        cov, (n, cpu), rec = measure([exe, "0.5"], "cpu_ns", out)
        rows.append(("cgo Go program", cov, n, cpu, shown(rec)))
    for name, cov, n, cpu, cmd in rows:
        print(f"| {name} | {cpu:.3f} | {n:.0f} | {cov:.3f} | `{cmd}` |")
        goal(4, f"every thread sampled whatever its signal mask: {name}",
             f"coverage {cov:.3f} (samples x period / CPU; met if >= {MIN_COVERAGE})",
             cov >= MIN_COVERAGE, cmd)
    if not exe:
        print(f"| cgo Go program | - | - | - | not run: {why} |")
        goal(4, "every thread sampled whatever its signal mask: cgo Go program", "-",
             f"not run ({why})", "tests/agent/drain_test.cpp Drain.CgoGoProgramIsSampled")
    print()
