// What a wake-up costs a thread here: 2,000 poll(NULL, 0, 1) calls (each a sleep of 1 ms and a
// wake-up by its timer), the thread's CPU time each, with EVENTS task clocks a CPU opened on the
// thread (inherited, as `sprofil record`'s ring thread holds its originals) that sample every
// 1 ms (SAMPLING 1, each mapped a ring) or only count (0). For docs/benchmarks.md, "Short
// processes, asked one at a time": record's passes over its rings are such wake-ups.
// Usage: cc -O2 bench/wake_cost.c -o wake_cost && ./wake_cost EVENTS SAMPLING
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double cpu_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int events = atoi(argv[1]), sampling = atoi(argv[2]);
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  for (int k = 0; k < events; k++) {
    for (long c = 0; c < ncpu; c++) {
      struct perf_event_attr a;
      memset(&a, 0, sizeof a);
      a.size = sizeof a;
      a.type = PERF_TYPE_SOFTWARE;
      a.config = PERF_COUNT_SW_TASK_CLOCK;
      a.sample_period = sampling ? 1000000 : 0;
      a.sample_type = PERF_SAMPLE_IP;
      a.inherit = 1;
      a.exclude_hv = 1;
      const int fd = (int)syscall(SYS_perf_event_open, &a, 0, (int)c, -1, 0);
      if (fd < 0) {
        perror("perf_event_open");
        return 1;
      }
      if (sampling &&
          mmap(NULL, 9 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED) {
        perror("mmap");
        return 1;
      }
    }
  }
  const double t0 = cpu_us();
  for (int i = 0; i < 2000; i++) poll(NULL, 0, 1);
  printf("%d task clock(s) a CPU, %s: %.1f us of CPU a wake-up\n", events,
         sampling ? "sampling" : "counting", (cpu_us() - t0) / 2000);
  return 0;
}
