/* One of scale-objects' many shared objects (copied K times under different names). */
__attribute__((noinline)) double scale_obj_fn(double x) {
  for (int i = 0; i < 100; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}
