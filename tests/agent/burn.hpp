// Burning a known amount of CPU inside a named function, for the agent tests' programs: the
// thread's CPU clock is read every ~0.3 ms of work, so nearly every sample of the burn lands in
// the burning function itself.
#pragma once

#include <time.h>

inline double agent_thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

inline double agent_process_cpu() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Defines extern "C" double NAME(double seconds): burns `seconds` of this thread's CPU time
// (seconds < 0: forever) and returns the thread CPU time it used.
#define AGENT_BURN(NAME)                                                                    \
  extern "C" __attribute__((noinline, visibility("default"))) double NAME(double seconds) { \
    const double t0 = agent_thread_cpu();                                                   \
    volatile double x = 1.0;                                                                \
    double now = t0;                                                                        \
    do {                                                                                    \
      double y = x;                                                                         \
      for (int i = 0; i < 100000; ++i) y = y * 1.0000001 + 1e-9;                            \
      x = y;                                                                                \
      now = agent_thread_cpu();                                                             \
    } while (seconds < 0 || now - t0 < seconds);                                            \
    return now - t0;                                                                        \
  }
