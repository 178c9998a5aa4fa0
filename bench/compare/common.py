"""What every section of bench/compare/compare.py shares: paths, settings, running a command,
medians, the profile readers, and the goal table the sections fill."""
import json
import os
import shlex
import statistics
import struct
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("BUILD", "build-compare")
BIN = os.path.join(ROOT, BUILD, "bin")
LIB = os.path.join(ROOT, BUILD, "lib")
WORK = os.environ.get("WORK", "/tmp/sprofil-compare")
QUICK = os.environ.get("QUICK", "0") == "1"
SPROFIL = os.path.join(BIN, "sprofil")

os.makedirs(WORK, exist_ok=True)


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def rel(p):
    """Paths in printed commands: relative to the repository root when inside it."""
    return os.path.relpath(p, ROOT) if p.startswith(ROOT) else p


def shown(argv, env=None):
    """A command as printed in the tables: env assignments, then argv, paths shortened."""
    envs = " ".join(f"{k}={rel(v)}" for k, v in (env or {}).items())
    return (envs + " " if envs else "") + " ".join(shlex.quote(rel(a)) for a in argv)


def med(v):
    return statistics.median(v) if v else float("nan")


def run(argv, env=None, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=None):
    """Runs argv (in WORK unless cwd); returns (wall s, CPU s of the whole process tree from
    wait4, stderr text, peak RSS KiB); raises if it fails."""
    e = dict(os.environ)
    if env:
        e.update(env)
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=e, stdout=stdout, stderr=stderr, cwd=cwd or WORK)
    err = p.stderr.read().decode(errors="replace") if stderr == subprocess.PIPE else ""
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{argv} failed ({p.returncode}): {err[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime, err, ru.ru_maxrss


def read_truth(path):
    """A truth file: "name value" lines."""
    out = {}
    with open(path) as f:
        for line in f:
            k, v = line.split()
            out[k] = float(v)
    return out


def record_argv(out, hz, argv, clock=None):
    """`sprofil record` of argv at hz into out; clock None: record's default."""
    return [SPROFIL, "record"] + (["--clock", clock] if clock else []) + [
        "-F", str(hz), "-o", out, "--"] + argv


def report_rows(path):
    """Samples per function name, from `sprofil report --format json`."""
    out = subprocess.run([SPROFIL, "report", path, "--format", "json"], capture_output=True,
                         text=True, check=True).stdout
    return {r["name"]: r["samples"] for r in json.loads(out)["rows"]}


def sprof_images(path):
    """File offsets of the process images: [0] for a process's own file, the process table's
    image offsets for the run profile `sprofil record` writes (docs/file-format.md)."""
    with open(path, "rb") as f:
        h = f.read(4096)
        if h[:8] != b"SPRFRUN\0":
            return [0]
        n = struct.unpack_from("<I", h, 16)[0]
        f.seek(4096)
        t = f.read(128 * n)
    return [struct.unpack_from("<Q", t, 128 * i + 8)[0] for i in range(n)]


def sprof_header(path):
    """The first process's header fields; delivered summed over the run's processes."""
    delivered = 0
    first = None
    with open(path, "rb") as f:
        for base in sprof_images(path):
            f.seek(base)
            h = f.read(112)
            tick_ns, eff_milli, _start, _end, cpu_ns = struct.unpack_from("<QQQQQ", h, 32)
            delivered += struct.unpack_from("<QQQ", h, 88)[1]
            if first is None:
                first = {"cpu_ns": cpu_ns, "effective_hz": eff_milli / 1000.0, "tick_ns": tick_ns}
    first["delivered"] = delivered
    return first


# ---------------------------------------------------------------- the goal table

GOALS = []  # (goal, what, figure, status, command)


def goal(number, what, figure, met, command):
    """One row of the goal table. met: True, False, or a string (e.g. "cited: no test build")."""
    status = ("**met**" if met else "**not met**") if isinstance(met, bool) else met
    GOALS.append((number, what, figure, status, command))


def print_goals():
    print("## The default profile's goals (this run)\n")
    print("Every figure is a median of this run; ratios are against a baseline measured in the "
          "same run. *met* is computed from the figures with the threshold stated in the row.\n")
    print("| goal | figure (medians, this run) | met? | command |")
    print("| --- | --- | --- | --- |")
    for number, what, figure, status, command in sorted(GOALS, key=lambda g: g[0]):
        print(f"| {number}. {what} | {figure} | {status} | `{command}` |")
    print()
