// A plugin the annotate tests' program dlopens (phase "plugin"): one hot function.
extern "C" __attribute__((noipa, visibility("default"))) double annotate_plugin_spin(long n) {
  double x = 5.0;
  for (long i = 0; i < n; ++i) x = x * 0.9999994 + 0.0625;  // PLUGIN_LOOP
  return x;
}
