/* What one of the record parent's period re-draws costs the thread it samples: a thread burns
 * a fixed number of iterations with a user-space task-clock event open on itself (drain mode's
 * event, 1 ms period), while the main thread, as the record parent does, issues COUNT
 * PERF_EVENT_IOC_PERIOD on that event, GAP_US apart (each an IPI of the running thread's CPU).
 * Prints "ioctls N cpu_ms T": the burning thread's CPU time. bench/redraw_ipi.sh runs it with
 * COUNT 0 and COUNT in turn.
 * Usage: redraw_ipi COUNT ITERS [GAP_US] */
#define _GNU_SOURCE
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_int g_fd = -1;
static atomic_int g_done = 0;
static long g_iters;
static double g_cpu_ms;

static double thread_cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void* burn(void* arg) {
  (void)arg;
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_SOFTWARE;
  a.size = sizeof a;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = 1000000;
  a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_READ;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  const int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
  if (fd < 0) {
    perror("perf_event_open");
    exit(2);
  }
  const double t0 = thread_cpu_ms();
  atomic_store(&g_fd, fd);
  volatile unsigned long x = 0;
  for (long i = 0; i < g_iters; i++) x += (unsigned long)i;
  g_cpu_ms = thread_cpu_ms() - t0;
  atomic_store(&g_done, 1);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: redraw_ipi COUNT ITERS [GAP_US]\n");
    return 2;
  }
  const int count = atoi(argv[1]);
  g_iters = atol(argv[2]);
  const long gap_us = argc > 3 ? atol(argv[3]) : 200;
  pthread_t t;
  pthread_create(&t, NULL, burn, NULL);
  while (atomic_load(&g_fd) < 0) {
  }
  const struct timespec gap = {0, gap_us * 1000};
  int sent = 0;
  while (!atomic_load(&g_done) && sent < count) {
    uint64_t p = 900000 + (uint64_t)(sent % 7) * 20000; /* periods about 1 ms, as jittered */
    if (ioctl(atomic_load(&g_fd), PERF_EVENT_IOC_PERIOD, &p) == 0) sent++;
    nanosleep(&gap, NULL);
  }
  pthread_join(t, NULL);
  printf("ioctls %d cpu_ms %.3f\n", sent, g_cpu_ms);
  return 0;
}
