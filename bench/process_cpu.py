#!/usr/bin/env python3
"""The profiled program's own CPU time, without the tool's: runs CMD N times in turn (fork, exec,
os.wait4) and prints LABEL, the median user + system time of CMD in ms, and its median minor
page faults. Run it under the tool, e.g.
    build/bin/sprofil record -o /tmp/p.sprof -- python3 bench/process_cpu.py sprofil 20 CMD...
    perf record -q -o /tmp/p.data -- python3 bench/process_cpu.py perf 20 CMD...
and alone for the native figure: the wrapper's own start-up under the tool is not counted.
With --spawn, CMD is started with os.posix_spawn (glibc's clone(CLONE_VFORK): no fork
handlers run in the child, so a preloaded agent does nothing between the fork and the exec)
instead of fork + exec: the difference is what the agent costs a forked child before its exec.
Usage: bench/process_cpu.py [--spawn] LABEL N CMD [ARGS...]   (CMD's stdout goes to /dev/null)"""
import os
import statistics
import sys


def main():
    args = sys.argv[1:]
    spawn = bool(args) and args[0] == "--spawn"
    if spawn:
        args = args[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    label, n, cmd = args[0], int(args[1]), args[2:]
    cpu, faults = [], []
    for _ in range(n):
        if spawn:
            to_null = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
            pid = os.posix_spawnp(cmd[0], cmd, os.environ, file_actions=to_null)
        else:
            pid = os.fork()
            if pid == 0:
                fd = os.open(os.devnull, os.O_WRONLY)
                os.dup2(fd, 1)
                try:
                    os.execvp(cmd[0], cmd)
                finally:
                    os._exit(127)
        _, _, ru = os.wait4(pid, 0)
        cpu.append((ru.ru_utime + ru.ru_stime) * 1000)
        faults.append(ru.ru_minflt)
    print(f"{label} {statistics.median(cpu):.2f} ms {statistics.median(faults):.0f} faults",
          file=sys.stderr)


main()
