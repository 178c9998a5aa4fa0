// clone_prog's C part: a static helper that GCC at -O2 specializes for the constant its two
// callers pass (clone_spin.constprop.0, a C name: the suffix stays in the symbol).
static __attribute__((noinline)) double clone_spin(long n, double k) {
  double x = 1.0;
  for (long i = 0; i < n; ++i) x = x * k + 0.5;
  return x;
}

double clone_c_work(long n) {
  return clone_spin(n, 0.9999999) + clone_spin(n / 2, 0.9999999);
}
