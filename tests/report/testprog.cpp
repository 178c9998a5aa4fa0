// The program the report tests symbolize (built with -g -O1 -fno-omit-frame-pointer): C++ names
// in namespaces, template instances, a member function, an always-inlined function (for
// --by line inline frames) and a call into a shared library. The MARK comments let the tests
// find line numbers; keep each on the line it marks.
#include <cstdio>
#include <cstdlib>

namespace testlib {
long lib_work(long n);
}

namespace demo {

template <typename T>
__attribute__((noinline)) T sum_squares(const T* v, int n) {
  T s = 0;
  for (int i = 0; i < n; ++i) s += v[i] * v[i];
  return s;
}

struct Widget {
  long state = 1;
  __attribute__((noinline)) long spin(long n);
};

long Widget::spin(long n) {
  for (long i = 0; i < n; ++i) state = state * 6364136223846793005L + 1442695040888963407L;
  return state;
}

static inline __attribute__((always_inline)) long mix(long x) {
  return (x * 2654435761L) ^ (x >> 7) ^ (x << 13);  // MARK:mix
}

__attribute__((noinline)) long uses_inline(long n) {
  long s = 0;
  for (long i = 0; i < n; ++i) {
    s += mix(i + s);  // MARK:call-mix
  }
  return s;
}

}  // namespace demo

int main(int argc, char** argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 1000;
  int vi[4] = {1, 2, 3, 4};
  double vd[4] = {1.5, 2.5, 3.5, 4.5};
  demo::Widget w;
  long r = demo::sum_squares(vi, 4) + long(demo::sum_squares(vd, 4)) + w.spin(n) +
           demo::uses_inline(n) + testlib::lib_work(n);
  std::printf("%ld\n", r);
  (void)argv;
  return 0;
}
