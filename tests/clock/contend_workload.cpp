// contend_workload A_MS B_MS SECONDS TRUTH: alternates burn_a (A_MS ms of this thread's CPU
// time) and burn_b (B_MS ms) until SECONDS of CPU time are spent, then writes the CPU seconds
// each took ("burn_a X" / "burn_b Y" lines) to TRUTH. The contention test (contention_test.cpp)
// records it beside two busy loops: the phases of its work then fall into step with the time
// slices the scheduler gives it.
#include <cstdio>
#include <cstdlib>

#include "burn.hpp"

// burn.hpp reads the thread's CPU clock every ~0.3 ms of work: nearly every sample of a burn
// lands in it, and each burn returns the CPU time it really took.
SPROFIL_BURN(burn_a)
SPROFIL_BURN(burn_b)

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
  return burn_write_truth(argv[4], {{"burn_a", a}, {"burn_b", b}}) ? 0 : 1;
}
