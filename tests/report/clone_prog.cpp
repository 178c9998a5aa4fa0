// The program of the annotate tests of GCC's clones (tests/report/annotate_test.cpp), built
// -O2 -g: std::sort of a vector, whose std::__introsort_loop GCC compiles as a clone
// (`... [clone .isra.0]`), then clone_c_work() (clone_spin.c), whose static helper is
// `clone_spin.constprop.0`.
// Usage: clone_prog N   (N elements sorted 5 times, then the helper: 100N steps and 50N)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" double clone_c_work(long n);

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  std::vector<unsigned> v(static_cast<size_t>(n));
  unsigned x = 12345;
  long sum = 0;
  for (int round = 0; round < 5; ++round) {
    for (unsigned& e : v) e = x = x * 1103515245u + 12345u;
    std::sort(v.begin(), v.end());
    sum += v[v.size() / 2];
  }
  std::printf("%ld %g\n", sum, clone_c_work(n * 100));
  return 0;
}
