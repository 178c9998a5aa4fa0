// The program of the annotate tests (tests/report/annotate_test.cpp), recorded with the real tool.
//   loops N  two_loops(): the first loop does N multiply-adds, the second 2N, each loop on a
//            source line of its own (their markers: LOOP_ ONE and TWO) with the same dependent
//            chain, so the second takes twice the time of the first.
//   lib N    annotate_lib_spin() in libreport_annotate_lib.so.
// Usage: annotate_prog PHASE N
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" double annotate_lib_spin(long n);

// clang-format off
__attribute__((noipa)) double two_loops(long n) {
  double a = 1.0, b = 2.0;
  for (long i = 0; i < n; ++i) a = a * 0.9999999 + 0.5;  // LOOP_ONE
  for (long i = 0; i < 2 * n; ++i) b = b * 0.9999998 + 0.25;  // LOOP_TWO
  return a + b;
}
// clang-format on

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: annotate_prog loops|lib N\n");
    return 2;
  }
  long n = std::atol(argv[2]);
  double s = std::strcmp(argv[1], "lib") == 0 ? annotate_lib_spin(n) : two_loops(n);
  std::printf("%g\n", s);
  return 0;
}
