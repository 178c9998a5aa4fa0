// The demo's unit of work: burn a given amount of this thread's CPU time inside one named
// function, so that where the time went is known by construction. The clock is read every
// ~0.5 ms of work, so almost all samples land in the burning function itself.
#pragma once

#include <sys/resource.h>
#include <time.h>

inline double demo_thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The whole process's CPU time (user + system), as getrusage reports it.
inline double demo_process_cpu() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// Defines extern "C" double NAME(double seconds): burns `seconds` of thread CPU time.
#define SPROFIL_DEMO_BURN(NAME)                                                             \
  extern "C" __attribute__((noinline, visibility("default"))) double NAME(double seconds) { \
    const double end = demo_thread_cpu() + seconds;                                         \
    double x = 1.0;                                                                         \
    do {                                                                                    \
      for (int i = 0; i < 200000; ++i) x = x * 1.0000001 + 1e-9;                            \
    } while (demo_thread_cpu() < end);                                                      \
    return x;                                                                               \
  }
