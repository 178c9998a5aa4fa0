// Burning a known amount of CPU inside a named function: the demo's unit of work, also used by
// bench/compare's cmp-burn4 and the agent tests' programs (CMake target sprofil_burn). The
// thread's CPU clock is read every ~0.3 ms of work, so nearly every sample of a burn lands in
// the burning function itself and where the time went is known by construction.
#pragma once

#include <time.h>

#include <cstdio>

inline double burn_thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The whole process's CPU time (user + system).
inline double burn_process_cpu() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Defines extern "C" double NAME(double seconds): burns `seconds` of this thread's CPU time
// (seconds < 0: forever) and returns the thread CPU time it used.
#define SPROFIL_BURN(NAME)                                                                  \
  extern "C" __attribute__((noinline, visibility("default"))) double NAME(double seconds) { \
    const double t0 = burn_thread_cpu();                                                    \
    volatile double x = 1.0;                                                                \
    double now = t0;                                                                        \
    do {                                                                                    \
      double y = x;                                                                         \
      for (int i = 0; i < 100000; ++i) y = y * 1.0000001 + 1e-9;                            \
      x = y;                                                                                \
      now = burn_thread_cpu();                                                              \
    } while (seconds < 0 || now - t0 < seconds);                                            \
    return now - t0;                                                                        \
  }

// One line "name value" of a truth file (what each function really used, and the like).
struct BurnTruth {
  const char* name;
  double value;
};

// Writes the lines to path; false if it cannot.
template <int N>
bool burn_write_truth(const char* path, const BurnTruth (&lines)[N]) {
  FILE* f = fopen(path, "w");
  if (!f) return false;
  for (const BurnTruth& l : lines) fprintf(f, "%s %.6f\n", l.name, l.value);
  return fclose(f) == 0;
}
