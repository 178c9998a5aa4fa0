// A shared library for the report tests: a namespaced function in another object.
namespace testlib {

__attribute__((noinline)) long lib_work(long n) {
  long s = 0;
  for (long i = 0; i < n; ++i) s += (i * 7) ^ (s >> 3);
  return s;
}

}  // namespace testlib
