// cmp-burn4: a single-threaded CPU-bound workload whose split of CPU time is known by
// construction. Four functions take turns in 10 ms slices and burn 40%, 30%, 20% and 10% of
// the requested CPU time; each slice is measured with CLOCK_THREAD_CPUTIME_ID
// (examples/demo/burn.hpp), and --truth FILE writes what each function really used
// ("name seconds" lines, plus "process_cpu seconds").
//
// Usage: cmp-burn4 [--seconds S (default 1)] [--truth FILE]
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "burn.hpp"

SPROFIL_DEMO_BURN(burn4_alpha)
SPROFIL_DEMO_BURN(burn4_beta)
SPROFIL_DEMO_BURN(burn4_gamma)
SPROFIL_DEMO_BURN(burn4_delta)

namespace {

double process_cpu() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  const char* truth = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--truth") && i + 1 < argc) {
      truth = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--seconds S] [--truth FILE]\n", argv[0]);
      return 2;
    }
  }
  struct Share {
    const char* name;
    double (*fn)(double);
    double fraction;
    double done, used;
  } shares[] = {{"burn4_alpha", burn4_alpha, 0.4, 0, 0},
                {"burn4_beta", burn4_beta, 0.3, 0, 0},
                {"burn4_gamma", burn4_gamma, 0.2, 0, 0},
                {"burn4_delta", burn4_delta, 0.1, 0, 0}};
  const double slice = 0.01;
  double sink = 0;
  for (bool more = true; more;) {
    more = false;
    for (Share& s : shares) {
      const double want = s.fraction * seconds;
      if (s.done >= want) continue;
      const double d = want - s.done < slice ? want - s.done : slice;
      const double t0 = demo_thread_cpu();
      sink += s.fn(d);
      s.used += demo_thread_cpu() - t0;
      s.done += d;
      more = true;
    }
  }
  const double total = process_cpu();
  printf("cmp-burn4: %.3f s CPU: alpha %.3f beta %.3f gamma %.3f delta %.3f (%g)\n", total,
         shares[0].used, shares[1].used, shares[2].used, shares[3].used, sink > 0 ? 1.0 : 0.0);
  if (truth) {
    FILE* f = fopen(truth, "w");
    if (!f) return 1;
    for (const Share& s : shares) fprintf(f, "%s %.6f\n", s.name, s.used);
    fprintf(f, "process_cpu %.6f\n", total);
    fclose(f);
  }
  return 0;
}
