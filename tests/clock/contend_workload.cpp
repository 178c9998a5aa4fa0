// contend_workload A_MS B_MS SECONDS TRUTH: alternates burn_a (A_MS ms of this thread's CPU
// time) and burn_b (B_MS ms) until SECONDS of CPU time are spent, then writes the CPU seconds
// each took ("burn_a X" / "burn_b Y" lines) to TRUTH. The contention test (contention_test.cpp)
// records it beside two busy loops: the phases of its work then fall into step with the time
// slices the scheduler gives it.
#include <time.h>

#include <cstdio>
#include <cstdlib>

namespace {

double thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The CPU clock is read every ~0.1 ms of work: nearly every sample of a burn lands in it.
#define CONTEND_BURN(NAME)                                                                  \
  extern "C" __attribute__((noinline, visibility("default"))) double NAME(double seconds) { \
    const double t0 = thread_cpu();                                                         \
    volatile double x = 1.0;                                                                \
    double now = t0;                                                                        \
    do {                                                                                    \
      double y = x;                                                                         \
      for (int i = 0; i < 30000; ++i) y = y * 1.0000001 + 1e-9;                             \
      x = y;                                                                                \
      now = thread_cpu();                                                                   \
    } while (now - t0 < seconds);                                                           \
    return now - t0;                                                                        \
  }
CONTEND_BURN(burn_a)
CONTEND_BURN(burn_b)

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: contend_workload A_MS B_MS SECONDS TRUTH\n");
    return 2;
  }
  const double a_s = atof(argv[1]) * 1e-3, b_s = atof(argv[2]) * 1e-3, total = atof(argv[3]);
  if (!(a_s > 0 && b_s > 0 && total > 0 && total < 60)) return 2;
  double a = 0, b = 0;
  while (a + b < total) {  // bounded: each round adds at least a_s + b_s > 0
    a += burn_a(a_s);
    b += burn_b(b_s);
  }
  FILE* f = fopen(argv[4], "w");
  if (!f) return 1;
  fprintf(f, "burn_a %.6f\nburn_b %.6f\n", a, b);
  return fclose(f) == 0 ? 0 : 1;
}
