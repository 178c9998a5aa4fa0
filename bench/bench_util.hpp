// Shared by the signal-level benchmarks: a clock reading and a fixed, call-free work loop
// whose cost per iteration does not depend on anything the profiler does.
#pragma once

#include <time.h>

#include <cstdint>

namespace bench {

inline uint64_t now_ns(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

inline volatile uint64_t g_sink;

__attribute__((noinline)) inline void work(uint64_t iters) {
  uint64_t x = 1;
  for (uint64_t i = 0; i < iters; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    asm volatile("" : "+r"(x));
  }
  g_sink = x;
}

// Iterations of work() that take about `seconds` of this thread's CPU time.
inline uint64_t calibrate_iters(double seconds) {
  const uint64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  work(50000000);
  const uint64_t dt = now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
  return static_cast<uint64_t>(50000000.0 * seconds * 1e9 / static_cast<double>(dt ? dt : 1));
}

}  // namespace bench
