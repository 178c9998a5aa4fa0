// The program of the annotate tests (tests/report/annotate_test.cpp), recorded with the real tool.
//   loops N  two_loops(): the first loop does N multiply-adds, the second 2N, each loop on a
//            source line of its own (their markers: LOOP_ ONE and TWO) with the same dependent
//            chain, so the second takes twice the time of the first.
//   lib N    annotate_lib_spin() in libreport_annotate_lib.so.
//   plugin N PATH  annotate_plugin_spin() of the plugin at PATH, dlopen'd.
//   inline N inline_outer(): its loop's work is in an always-inlined helper (marked INL_ STEP).
// Usage: annotate_prog PHASE N
#include <dlfcn.h>

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

static inline __attribute__((always_inline)) double inl_step(double x) {
  return x * 0.9999995 + 0.125;  // INL_STEP
}

__attribute__((noipa)) double inline_outer(long n) {
  double x = 4.0;
  for (long i = 0; i < n; ++i) x = inl_step(x);
  return x;
}
// clang-format on

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "plugin") == 0) {
    void* h = dlopen(argv[3], RTLD_NOW);
    if (h == nullptr) {
      std::fprintf(stderr, "%s\n", dlerror());
      return 1;
    }
    auto spin = reinterpret_cast<double (*)(long)>(dlsym(h, "annotate_plugin_spin"));
    if (spin == nullptr) return 1;
    std::printf("%g\n", spin(std::atol(argv[2])));
    return 0;  // not dlclose'd: the region stays until the end, as most plugins do
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: annotate_prog loops|lib|inline N | plugin N PATH\n");
    return 2;
  }
  long n = std::atol(argv[2]);
  double s = std::strcmp(argv[1], "lib") == 0      ? annotate_lib_spin(n)
             : std::strcmp(argv[1], "inline") == 0 ? inline_outer(n)
                                                   : two_loops(n);
  std::printf("%g\n", s);
  return 0;
}
