// The program of tests/report/exports_test.cpp (built with -g, and again without debug
// information), by its first argument:
//   inline N   exports_hot.hpp's hot_step inlined at two call sites of main, N steps each;
//   semi N     a function whose symbol is `hot;spot` (an assembler's quoted name), N steps.
// The MARK comments let the test find line numbers; keep each on the line it marks.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "exports_hot.hpp"

extern "C" __attribute__((noinline)) unsigned long semi_spin(long n) __asm__("\"hot;spot\"");

extern "C" unsigned long semi_spin(long n) {
  unsigned long x = 1;
  for (long i = 0; i < n; ++i) x = x * 2862933555777941757ul + 3037000493ul;
  return x;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s inline|semi N\n", argv[0]);
    return 2;
  }
  const long n = std::atol(argv[2]);
  unsigned long a = unsigned(argc);
  if (std::strcmp(argv[1], "semi") == 0) {
    a = semi_spin(n);
  } else if (std::strcmp(argv[1], "inline") == 0) {
    for (long i = 0; i < n; ++i) a = hot_step(a);                       // MARK:first-site
    for (long i = 0; i < n; ++i) a = hot_step(a ^ (unsigned long)(i));  // MARK:second-site
  }
  std::printf("%lu\n", a & 1);
  return 0;
}
