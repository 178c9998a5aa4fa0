// cmp-burn4: a single-threaded CPU-bound workload whose split of CPU time is known by
// construction. Four functions take turns in 10 ms slices and burn 40%, 30%, 20% and 10% of
// the requested CPU time; each slice is measured with CLOCK_THREAD_CPUTIME_ID
// (examples/demo/burn.hpp), and --truth FILE writes what each function really used
// ("name seconds" lines, plus "process_cpu seconds" and "iterations N").
//
// With --iters N the work is fixed instead: the functions run 40/30/20/10% of N loop
// iterations (in slices of N/100), so that a profiler's overhead shows as more CPU time; a
// --seconds run writes the iterations it did, to calibrate N. (The --seconds mode, like
// sprofil-demo, burns a fixed CPU budget: overhead inside the thread only means less work.)
//
// Usage: cmp-burn4 [--seconds S (default 1) | --iters N] [--truth FILE]

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "burn.hpp"

namespace {
long g_iterations = 0;  // loop iterations done, all functions
}  // namespace

// Like SPROFIL_BURN (examples/demo/burn.hpp), plus a fixed-work mode: iters > 0.
#define CMP_BURN(NAME)                                                           \
  extern "C" __attribute__((noinline)) double NAME(double seconds, long iters) { \
    double x = 1.0;                                                              \
    if (iters > 0) {                                                             \
      for (long i = 0; i < iters; ++i) x = x * 1.0000001 + 1e-9;                 \
      g_iterations += iters;                                                     \
      return x;                                                                  \
    }                                                                            \
    const double end = burn_thread_cpu() + seconds;                              \
    do {                                                                         \
      for (int i = 0; i < 200000; ++i) x = x * 1.0000001 + 1e-9;                 \
      g_iterations += 200000;                                                    \
    } while (burn_thread_cpu() < end);                                           \
    return x;                                                                    \
  }
CMP_BURN(burn4_alpha)
CMP_BURN(burn4_beta)
CMP_BURN(burn4_gamma)
CMP_BURN(burn4_delta)

int main(int argc, char** argv) {
  double seconds = 1.0;
  long iters = 0;
  const char* truth = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
      iters = atol(argv[++i]);
    } else if (!strcmp(argv[i], "--truth") && i + 1 < argc) {
      truth = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--seconds S] [--truth FILE]\n", argv[0]);
      return 2;
    }
  }
  struct Share {
    const char* name;
    double (*fn)(double, long);
    double fraction;
    double done, used;
  } shares[] = {{"burn4_alpha", burn4_alpha, 0.4, 0, 0},
                {"burn4_beta", burn4_beta, 0.3, 0, 0},
                {"burn4_gamma", burn4_gamma, 0.2, 0, 0},
                {"burn4_delta", burn4_delta, 0.1, 0, 0}};
  const double slice = 0.01;
  const double iter_slice = static_cast<double>(iters) / 100;
  double sink = 0;
  for (bool more = true; more;) {
    more = false;
    for (Share& s : shares) {
      const double want = s.fraction * (iters > 0 ? static_cast<double>(iters) : seconds);
      const double step = iters > 0 ? iter_slice : slice;
      if (s.done >= want) continue;
      const double d = want - s.done < step ? want - s.done : step;
      const double t0 = burn_thread_cpu();
      sink += iters > 0 ? s.fn(0, d < 1 ? 1 : static_cast<long>(d)) : s.fn(d, 0);
      s.used += burn_thread_cpu() - t0;
      s.done += d;
      more = true;
    }
  }
  const double total = burn_process_cpu();
  printf("cmp-burn4: %.3f s CPU: alpha %.3f beta %.3f gamma %.3f delta %.3f (%g)\n", total,
         shares[0].used, shares[1].used, shares[2].used, shares[3].used, sink > 0 ? 1.0 : 0.0);
  const BurnTruth lines[] = {
      {shares[0].name, shares[0].used}, {shares[1].name, shares[1].used},
      {shares[2].name, shares[2].used}, {shares[3].name, shares[3].used},
      {"process_cpu", total},           {"iterations", static_cast<double>(g_iterations)}};
  return truth && !burn_write_truth(truth, lines) ? 1 : 0;
}
