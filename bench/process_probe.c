// A preloaded probe for bench/process_split.sh: prints "Q START END" on stderr at the process's
// exit, its process CPU clock in microseconds when the probe's constructor ran and when its
// exit handler ran. Put after the agent in LD_PRELOAD, its constructor runs before the
// agent's (the loader initializes independent objects in the reverse order of their loading)
// and its exit handler after the agent's (registered first, it runs last): START is the exec
// and the loader's work, END - START the agent's start, main and the agent's exit handler,
// and the process's total (wait4) - END the end of the process in libc and the kernel.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static unsigned long long g_start;

static unsigned long long process_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (unsigned long long)t.tv_sec * 1000000ull + (unsigned long long)t.tv_nsec / 1000ull;
}

static void at_exit(void) {
  char line[64];
  const int n = snprintf(line, sizeof line, "Q %llu %llu\n", g_start, process_us());
  if (n > 0) (void)!write(2, line, (size_t)n);
}

__attribute__((constructor)) static void probe_start(void) {
  g_start = process_us();
  atexit(at_exit);
}
