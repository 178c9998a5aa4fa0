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

}  // namespace bench
