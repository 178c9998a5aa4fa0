"""What every section of bench/compare/compare.py shares: paths, settings, running a command,
medians, the profile readers, and the goal table the sections fill."""
import json
import os
import shlex
import statistics
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


def kernel_sampled():
    """Whether record's default samples the command's kernel time here, as it does where the
    kernel allows it (root, or perf_event_paranoid 1 or less; docs/agent.md, "Weights")."""
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            return int(f.read()) <= 1
    except (OSError, ValueError):
        return False


# perf record's options for the scope record's default samples: kernel time too where it may
# (perf record's own default), else user time only. The comparisons used `--all-user` always
# till 4aa1882, from when record's default sampled user time only; since 81bda1f it samples the
# kernel's time too where allowed, and on work mostly in the kernel (short processes, threads
# switching through pipes) it took several times the samples of perf record --all-user (126
# sample records against 22 for 300 short processes; perf record with the kernel's, 159).
PERF_SCOPE = [] if kernel_sampled() else ["--all-user"]


def perf_record(hz, out, scope=None):
    """perf record's argv before the command: task clock at `hz`, into `out`, of the scope of
    record's default (PERF_SCOPE) unless `scope` is given."""
    return (["perf", "record", "-q", "-e", "task-clock"] +
            (PERF_SCOPE if scope is None else scope) + ["-F", str(hz), "-o", out, "--"])


def perf_configs(hz, out, cmd):
    """The perf record configurations of a side-by-side table: "perf record" (the judged one,
    of record's default's scope) and, where that includes the kernel's time, "perf record
    --all-user" (shown)."""
    c = {"perf record": perf_record(hz, out) + cmd}
    if not PERF_SCOPE:
        c["perf record --all-user"] = perf_record(hz, out, ["--all-user"]) + cmd
    return c


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
    return {r["name"]: r["samples"] for r in report_json(path)["rows"]}


def report_json(path, *extra):
    """`sprofil report --format json` of a profile: the tool reads the file, so the bench holds no
    second definition of its layout (docs/file-format.md)."""
    out = subprocess.run([SPROFIL, "report", path, "--format", "json", *extra], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def sprof_header(path):
    """The run's delivered samples, effective rate (the root process's, as the report gives it)
    and CPU time of its processes."""
    j = report_json(path)
    return {"delivered": j["delivered"], "effective_hz": j["effective_hz"],
            "cpu_ns": j["cpu_seconds"] * 1e9, "tick_ns": j["tick_ns"]}


def sprof_nonzero_bins(path):
    """The profile's non-zero counters: one row each of the report by address."""
    return len(report_json(path, "--by", "address", "--min-percent", "0")["rows"])


# ---------------------------------------------------------------- the goal table

GOALS = []  # (goal, what, figure, status, command)


def goal(number, what, figure, met, command):
    """One row of the goal table. met: True, False, or a string (e.g. "cited: no test build")."""
    status = ("**met**" if met else "**not met**") if isinstance(met, bool) else met
    GOALS.append((number, what, figure, status, command))


def against_perf(commands, own, tree, digits, unit, what):
    """A side-by-side table of the program's own and the whole tree's CPU (medians of the
    rounds, in ms) for each configuration of `commands` (name -> argv), then goal 1's row for
    each of sprofil's against perf record's: judged for record's default, shown for `--agent`
    (an option). what(name) words the row; unit follows the ms (" a process")."""
    print("| configuration | the program's own CPU | the whole tree's CPU | command |")
    print("| --- | ---: | ---: | --- |")
    for name, argv in commands.items():
        print(f"| {name} | {med(own[name]):.{digits}f} | {med(tree[name]):.{digits}f} | "
              f"`{shown(argv)}` |")
    print()
    perf_own, perf_tree = med(own["perf record"]), med(tree["perf record"])
    user = "perf record --all-user"
    for name in (c for c in commands if c.startswith("sprofil")):
        o, t = med(own[name]), med(tree[name])
        paired = sorted(a / b for a, b in zip(own[name], own["perf record"]))
        met = o <= perf_own and t <= perf_tree
        scope = (f"; against {user}, user time only: program CPU {o / med(own[user]):.3f}x, "
                 f"tree CPU {t / med(tree[user]):.3f}x" if user in commands else "")
        goal(1, what(name),
             f"program CPU {o / perf_own:.3f}x perf record's ({o:.{digits}f} vs "
             f"{perf_own:.{digits}f} ms{unit}; per round {med(paired):.3f}x, {paired[0]:.3f} to "
             f"{paired[-1]:.3f}), tree CPU {t / perf_tree:.3f}x ({t:.{digits}f} vs "
             f"{perf_tree:.{digits}f} ms){scope} (met if both <= 1)",
             met if "--agent" not in name else
             "an option, not judged: " + ("at or below" if met else "above") + " perf record's",
             shown(commands[name]))


def print_goals():
    print("## The default profile's goals (this run)\n")
    print("Every figure is a median of this run; ratios are against a baseline measured in the "
          "same run. *met* is computed from the figures with the threshold stated in the row.\n")
    print("| goal | figure (medians, this run) | met? | command |")
    print("| --- | --- | --- | --- |")
    for number, what, figure, status, command in sorted(GOALS, key=lambda g: g[0]):
        print(f"| {number}. {what} | {figure} | {status} | `{command}` |")
    print()
