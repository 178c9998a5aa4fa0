#!/usr/bin/env python3
"""The profiled program's own CPU time, without the tool's: runs CMD N times in turn (fork, exec,
os.wait4) and prints LABEL, the median user + system time of CMD in ms, and its median minor
page faults. Run it under the tool, e.g.
    build/bin/sprofil record -o /tmp/p.sprof -- python3 bench/process_cpu.py sprofil 20 CMD...
    perf record -q -o /tmp/p.data -- python3 bench/process_cpu.py perf 20 CMD...
and alone for the native figure: the wrapper's own start-up under the tool is not counted.
Usage: bench/process_cpu.py LABEL N CMD [ARGS...]   (CMD's stdout goes to /dev/null)"""
import os
import statistics
import sys


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    label, n, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    cpu, faults = [], []
    for _ in range(n):
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
