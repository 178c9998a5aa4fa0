/* A statically linked program that burns CPU in a named function, for `sprofil record
 * --agentless` (which profiles what the default mode refuses, agentless_test.cpp):
 *
 *   record_static_burn SECONDS TRUTH
 *
 * burns SECONDS of its thread's CPU time in static_burn_hot, writes "static_burn_hot USED" and
 * "process_cpu CPU" lines (what it really used) to TRUTH, prints "burned" and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double clock_seconds(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The thread's CPU clock is read every ~0.3 ms of work (as burn.hpp's burns), so nearly every
 * sample of the burn lands in this function itself. */
__attribute__((noinline)) double static_burn_hot(double seconds) {
  const double t0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
  volatile double x = 1.0;
  double now = t0;
  do {
    double y = x;
    for (int i = 0; i < 100000; ++i) y = y * 1.0000001 + 1e-9;
    x = y;
    now = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
  } while (now - t0 < seconds);
  return now - t0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: record_static_burn SECONDS TRUTH\n");
    return 2;
  }
  const double used = static_burn_hot(atof(argv[1]));
  FILE* f = fopen(argv[2], "w");
  if (!f) return 1;
  fprintf(f, "static_burn_hot %.6f\nprocess_cpu %.6f\n", used,
          clock_seconds(CLOCK_PROCESS_CPUTIME_ID));
  if (fclose(f) != 0) return 1;
  puts("burned");
  return 0;
}
