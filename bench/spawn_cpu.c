// The C counterpart of `bench/process_cpu.py --spawn`, without an interpreter around it: runs
// CMD N times in turn (posix_spawn, stdout to /dev/null), each time waits for it (wait4) and
// prints LABEL, the median user + system time of CMD in ms and its median minor page faults.
// Run it under a tool (sprofil record, perf record) for that tool's cost to each process; the
// tool's own start-up is not counted. For bench/spawn_ab.sh. With SPAWN_EACH=1 in its
// environment it also prints "W CPU" (microseconds) on stderr for each process as it ends
// (bench/process_split.sh pairs them with the probe's lines). With SPAWN_FORK=1 it forks and
// the child execs CMD (execvp): the child's time before its exec (a profiled parent's fork
// handlers, its hand-over, the exec's flush) is then in CMD's. With SPAWN_FORK=1 and
// SPAWN_EXIT=1 the child calls _exit(0) at once instead: what a forked child costs by itself.
// With SPAWN_TOTALS=1 it also prints "TOTALS <sum> <self>" on stderr at the end: the CMDs' CPU
// summed and its own (ms), so that a tool's own CPU is the tool's tree less both
// (bench/tool_cpu.py).
// Usage: spawn_cpu LABEL N CMD [ARGS...]
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn_child.h"

extern char** environ;

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const int n = atoi(argv[2]);
  const char* each_env = getenv("SPAWN_EACH");
  const char* fork_env = getenv("SPAWN_FORK");
  const int use_fork = fork_env && fork_env[0] == '1';
  const char* exit_env = getenv("SPAWN_EXIT");
  const int just_exit = exit_env && exit_env[0] == '1';
  const int each = each_env && each_env[0] == '1';
  if (n <= 0) return 2;
  double* cpu = calloc((size_t)n, sizeof *cpu);
  double* faults = calloc((size_t)n, sizeof *faults);
  if (!cpu || !faults) return 1;
  posix_spawn_file_actions_t fa;
  spawn_to_null(&fa);
  for (int i = 0; i < n; ++i) {
    pid_t pid;
    if (use_fork) {
      pid = fork();
      if (pid < 0) return 1;
      if (pid == 0) {
        if (just_exit) _exit(0);
        const int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execvp(argv[3], argv + 3);
        _exit(127);
      }
    } else if (posix_spawnp(&pid, argv[3], &fa, NULL, argv + 3, environ) != 0) {
      return 1;
    }
    struct rusage ru;
    int status;
    if (wait4(pid, &status, 0, &ru) != pid) return 1;
    cpu[i] = (double)child_cpu_us(&ru) / 1e3;
    if (each) fprintf(stderr, "W %.0f\n", cpu[i] * 1e3);
    faults[i] = (double)ru.ru_minflt;
  }
  const char* totals_env = getenv("SPAWN_TOTALS");
  if (totals_env && totals_env[0] == '1') {
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += cpu[i];
    struct rusage me;
    getrusage(RUSAGE_SELF, &me);
    fprintf(stderr, "TOTALS %.3f %.3f\n", sum, (double)child_cpu_us(&me) / 1e3);
  }
  qsort(cpu, (size_t)n, sizeof *cpu, by_value);
  qsort(faults, (size_t)n, sizeof *faults, by_value);
  printf("%s %.3f ms %.0f faults\n", argv[1], cpu[n / 2], faults[n / 2]);
  return 0;
}
