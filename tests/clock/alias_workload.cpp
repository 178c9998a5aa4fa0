// alias_workload HALF_US SECONDS: alternates func_a and func_b, each for HALF_US microseconds
// of thread CPU time, for SECONDS of CPU. Periodic code in lockstep with a sampling clock of
// period 2 x HALF_US (or a divisor of it) is where a profiler without jitter aliases.
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace {
long cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}
}  // namespace

// Each function reads the thread's CPU clock once per kChecks iterations (a few us): the clock
// is a system call (CLOCK_THREAD_CPUTIME_ID has no vDSO path), and read every 50 iterations it
// took two thirds of the run on an AMD EPYC VM, leaving the two functions too few samples.
constexpr int kChecks = 2000;

extern "C" __attribute__((noinline)) double func_a(long until) {
  double x = 1;
  while (cpu_ns() < until)
    for (int i = 0; i < kChecks; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

extern "C" __attribute__((noinline)) double func_b(long until) {
  double x = 1;
  while (cpu_ns() < until)
    for (int i = 0; i < kChecks; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s HALF_US SECONDS\n", argv[0]);
    return 2;
  }
  const long half = std::atol(argv[1]) * 1000;
  long t = cpu_ns();
  const long end = t + static_cast<long>(std::atof(argv[2]) * 1e9);
  double x = 0;
  while (t < end) {
    x += func_a(t + half);
    x += func_b(t + 2 * half);
    t += 2 * half;
  }
  return x > 0 ? 0 : 1;
}
