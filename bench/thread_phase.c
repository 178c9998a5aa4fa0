// Many short threads that run the same work from their start: each of N threads (made and
// joined in turn) runs fa, fb, fc, fd for Q ms of wall time each, three times over, timed with
// the TSC inline (no call: each function's time is its own). Natively each of the four
// functions has a quarter of the threads' time; a sampler whose first sample of a thread falls
// at the same point of its work in every thread (a first period fixed at the clone, as an
// inherited perf event's is) gives them other shares. For bench/thread_phase.sh.
// Usage: thread_phase N Q_MS
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static double g_ticks_per_ms;
static unsigned long long g_ticks;  // Q ms in TSC ticks
static volatile unsigned long long g_sink;

#define SPIN(name)                                      \
  __attribute__((noinline)) static void name(void) {    \
    const unsigned long long start = __rdtsc();         \
    unsigned long long x = 0;                           \
    while (__rdtsc() - start < g_ticks) x += x * 3 + 1; \
    g_sink = x;                                         \
  }
SPIN(fa)
SPIN(fb)
SPIN(fc)
SPIN(fd)

static void* worker(void* arg) {
  (void)arg;
  for (int r = 0; r < 3; ++r) {
    fa();
    fb();
    fc();
    fd();
  }
  return NULL;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int n = atoi(argv[1]);
  const double q = atof(argv[2]);
  const double t0 = now_ms();
  const unsigned long long c0 = __rdtsc();
  while (now_ms() - t0 < 50) {
  }
  g_ticks_per_ms = (double)(__rdtsc() - c0) / (now_ms() - t0);
  g_ticks = (unsigned long long)(q * g_ticks_per_ms);
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) return 1;
    pthread_join(t, NULL);
  }
  return 0;
}
