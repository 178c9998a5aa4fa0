// The program of tests/report/exports_test.cpp (built with -g), by its first argument:
//   inline N   exports_hot.hpp's hot_step inlined at two call sites of main, N steps each.
// The MARK comments let the test find line numbers; keep each on the line it marks.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "exports_hot.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s inline N\n", argv[0]);
    return 2;
  }
  const long n = std::atol(argv[2]);
  unsigned long a = unsigned(argc);
  if (std::strcmp(argv[1], "inline") == 0) {
    for (long i = 0; i < n; ++i) a = hot_step(a);                       // MARK:first-site
    for (long i = 0; i < n; ++i) a = hot_step(a ^ (unsigned long)(i));  // MARK:second-site
  }
  std::printf("%lu\n", a & 1);
  return 0;
}
