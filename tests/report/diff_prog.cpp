// The program of the diff tests (tests/report/diff_test.cpp), recorded with the real tool:
// three functions doing the same kind of work (a dependent multiply-add chain), diff_beta
// FACTOR times as much as each of the others. With `kill` it ends by SIGKILL to itself (a
// profile that did not finish).
// Usage: diff_prog ITERATIONS FACTOR [kill]
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/xorshift.hpp"

__attribute__((noipa)) double diff_alpha(long n) {
  double x = 1.0;
  for (long i = 0; i < n; ++i) x = x * 0.9999999 + 0.5;
  return x;
}
__attribute__((noipa)) double diff_beta(long n) {
  double x = 1.0;
  for (long i = 0; i < n; ++i) x = x * 0.9999998 + 0.25;
  return x;
}
__attribute__((noipa)) double diff_gamma(long n) {
  double x = 2.0;
  for (long i = 0; i < n; ++i) x = x * 0.9999997 + 0.125;
  return x;
}

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 4 && std::strcmp(argv[3], "kill") == 0)) {
    std::fprintf(stderr, "usage: diff_prog ITERATIONS FACTOR [kill]\n");
    return 2;
  }
  long n = std::atol(argv[1]);
  double factor = std::atof(argv[2]);
  double s = 0;
  // Interleaved in 200 rounds (about 1 ms a call) so that a slow phase of the machine hits
  // every function alike. With 20 rounds (6 ms a call) an A/A pair in the CI's loaded sanitizer
  // build once moved a share by 13 points: the task clock counts the VM's steal time, which
  // came in bursts longer than a call. Each round calls the three in an order drawn from a
  // fixed seed (the same work in every run): in a fixed order the program is periodic, and a
  // thread sampled at one fixed period (record's default draws one a thread: docs/agent.md,
  // "Against aliasing") aliased with it now and then, which the A/A test would take for
  // diff's false positives (bench/diff_aa.sh: 4 pairs in 40 flagged, 2 moved a share by over
  // 12 points; in drawn orders, docs/benchmarks.md, "diff: A/A false-positive rate").
  constexpr long kRounds = 200;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (long round = 0; round < kRounds; ++round) {
    sprofil::util::xorshift(&seed);
    static constexpr int kOrders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                          {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int f : kOrders[seed % 6]) {
      if (f == 0) s += diff_alpha(n / kRounds);
      if (f == 1) s += diff_beta(long(double(n / kRounds) * factor));
      if (f == 2) s += diff_gamma(n / kRounds);
    }
  }
  std::printf("%g\n", s);
  if (argc == 4) {
    std::fflush(stdout);
    std::raise(SIGKILL);
  }
  return 0;
}
