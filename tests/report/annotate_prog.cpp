// The program of the annotate tests (tests/report/annotate_test.cpp), recorded with the real tool.
//   loops N  two_loops(): the first loop does N multiply-adds, the second 2N, each loop on a
//            source line of its own (their markers: LOOP_ ONE and TWO) with the same dependent
//            chain, so the second takes twice the time of the first.
//   lib N    annotate_lib_spin() in libreport_annotate_lib.so.
//   plugin N PATH  annotate_plugin_spin() of the plugin at PATH, dlopen'd.
//   inline N inline_outer(): its loop's work is in an always-inlined helper (marked INL_ STEP).
//   method N ann::Worker::spin(): a method of a class in a namespace, for --function by the
//            name's last components; its loop's line (marked METHOD_ LOOP) is indented by a tab.
//   mixed N  N multiply-adds in each of six static functions (mixed_hidden_0..5, 256 bytes
//            apart: no dynamic symbol, so `[unknown]` in a stripped copy, six ranges), 4N in
//            mixed_hot_a() and 3N in mixed_hot_b() (exported: named even when stripped). Each
//            named one is hotter than any hidden one, and both are colder than the six together.
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
// Static, so that -rdynamic does not export them; aligned so that their loops lie more than the
// 64 bytes apart that annotate gathers into one range.
#define MIXED_HIDDEN(k)                                                      \
  static __attribute__((noipa, aligned(256))) double mixed_hidden_##k(long n) { \
    double x = 1.0 + k;                                                      \
    for (long i = 0; i < n; ++i) x = x * 0.9999999 + 0.5;                    \
    return x;                                                                \
  }
MIXED_HIDDEN(0) MIXED_HIDDEN(1) MIXED_HIDDEN(2) MIXED_HIDDEN(3) MIXED_HIDDEN(4) MIXED_HIDDEN(5)

__attribute__((noipa)) double mixed_hot_a(long n) {
  double x = 3.0;
  for (long i = 0; i < n; ++i) x = x * 0.9999998 + 0.25;
  return x;
}

__attribute__((noipa)) double mixed_hot_b(long n) {
  double x = 5.0;
  for (long i = 0; i < n; ++i) x = x * 0.9999997 + 0.125;
  return x;
}

namespace ann {
struct Worker {
  double spin(long n);
};
__attribute__((noipa)) double Worker::spin(long n) {
  double x = 6.0;
	for (long i = 0; i < n; ++i) x = x * 0.9999996 + 0.0625;  // METHOD_LOOP
  return x;
}
}  // namespace ann

double mixed(long n) {
  double s = 0;
  // In 50 rounds, so that a slow phase of the machine hits every function alike.
  constexpr long kRounds = 50;
  const long m = n / kRounds;
  for (long round = 0; round < kRounds; ++round)
    s += mixed_hidden_0(m) + mixed_hidden_1(m) + mixed_hidden_2(m) + mixed_hidden_3(m) +
         mixed_hidden_4(m) + mixed_hidden_5(m) + mixed_hot_a(4 * m) + mixed_hot_b(3 * m);
  return s;
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
    std::fprintf(stderr, "usage: annotate_prog loops|lib|inline|method|mixed N | plugin N PATH\n");
    return 2;
  }
  long n = std::atol(argv[2]);
  double s = std::strcmp(argv[1], "lib") == 0      ? annotate_lib_spin(n)
             : std::strcmp(argv[1], "inline") == 0 ? inline_outer(n)
             : std::strcmp(argv[1], "mixed") == 0  ? mixed(n)
             : std::strcmp(argv[1], "method") == 0 ? ann::Worker().spin(n)
                                                   : two_loops(n);
  std::printf("%g\n", s);
  return 0;
}
