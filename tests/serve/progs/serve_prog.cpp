// A program with a known split for tests/serve, run under `sprofil record --live`: for SECONDS
// of wall time (bounded) it alternates serve_heavy() (3 units of work) and serve_light() (1 unit
// of the same loop), so that about 75% of its CPU time is in serve_heavy and 25% in serve_light
// whatever the scheduler does. It prints "ready PID" when it starts.
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

volatile unsigned long g_sink;

__attribute__((noinline)) unsigned long spin(unsigned long x, int n) {
  for (int i = 0; i < n; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  return x;
}

}  // namespace

// Kept out of line and separate so that their addresses name them.
extern "C" __attribute__((noinline)) unsigned long serve_heavy(unsigned long x) {
  for (int i = 0; i < 300000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  return x;
}
extern "C" __attribute__((noinline)) unsigned long serve_light(unsigned long x) {
  for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ul + 1442695040888963407ul;
  return x;
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 1;
  printf("ready %d\n", getpid());
  fflush(stdout);
  const double end = now_s() + seconds;
  unsigned long x = 1;
  while (now_s() < end) {
    x = serve_heavy(x);
    x = serve_light(x);
  }
  g_sink = spin(x, 1);
  return 0;
}
