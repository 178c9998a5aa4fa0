// The shared library of the annotate tests: one hot function (its loop marked LIB_ LOOP).
extern "C" __attribute__((noipa)) double annotate_lib_spin(long n) {
  double x = 3.0;
  for (long i = 0; i < n; ++i) x = x * 0.9999996 + 0.75;  // LIB_LOOP
  return x;
}
