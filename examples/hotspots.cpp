// Example: profile two functions of this program with the modern C++ API and print where the
// samples fell. Build: cmake --build build --target example_hotspots; run
// build/bin/example_hotspots
#include <sprofil/sprofil.hpp>

#include <cmath>
#include <cstdio>

extern "C" __attribute__((noinline)) double slow_sum(int n) {
  double s = 0;
  for (int i = 1; i < n; ++i) s += std::sqrt(static_cast<double>(i));
  return s;
}

extern "C" __attribute__((noinline)) double fast_sum(int n) {
  double s = 0;
  for (int i = 1; i < n; ++i) s += 1.0 / i;
  return s;
}

int main() {
  sprofil::Profiler prof;  // per-thread CPU clock, 1000 Hz, 4-byte bins
  prof.add_function(reinterpret_cast<const void*>(&slow_sum))
      .add_function(reinterpret_cast<const void*>(&fast_sum))
      .start();
  double x = 0;
  for (int r = 0; r < 40; ++r) x += slow_sum(2000000) + fast_sum(500000);
  prof.stop();
  const sprofil::Snapshot snap = prof.snapshot();
  std::printf("samples: %llu (tick %.3f ms), outside the two functions: %llu\n",
              static_cast<unsigned long long>(snap.delivered), snap.tick_ns / 1e6,
              static_cast<unsigned long long>(snap.outside));
  for (const auto& r : snap.regions)
    std::printf("%-10s %6llu samples  %.3f s\n", r.name.c_str(),
                static_cast<unsigned long long>(r.total()), r.total() * snap.tick_ns / 1e9);
  return x > 0 ? 0 : 1;
}
