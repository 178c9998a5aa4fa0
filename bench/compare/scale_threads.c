/* scale-threads: N threads (default 64) each run a fixed amount of work in one function,
 * so a profiler's overhead shows as more CPU time. Usage: scale-threads N ITERS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long g_iters;
static volatile double g_sink;

__attribute__((noinline)) static double scale_work(long iters) {
  double x = 1.0;
  for (long i = 0; i < iters; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

static void* worker(void* arg) {
  (void)arg;
  g_sink = scale_work(g_iters);
  return NULL;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 64;
  g_iters = argc > 2 ? atol(argv[2]) : 100000000L;
  pthread_t* t = calloc((size_t)n, sizeof *t);
  if (!t) return 1;
  for (int i = 0; i < n; ++i)
    if (pthread_create(&t[i], NULL, worker, NULL) != 0) return 1;
  for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
  free(t);
  return 0;
}
