// A shared library for the naming tests: a tiny function called through the PLT.
extern "C" __attribute__((noinline)) long names_tiny(long x) {
  return x * 3 + 1;
}
