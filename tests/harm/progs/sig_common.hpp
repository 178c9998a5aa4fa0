// Shared by the sig_* programs: CPU clocks, a burn loop, and the report file the test reads
// ($SIG_REPORT, outside the scratch directory the harness compares).
#pragma once

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t cpu_ns(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// `sig` alone, blocked or unblocked (`how`) in the calling thread's mask, with its disposition
// set to `handler` first.
static inline void set_signal(int sig, void (*handler)(int), int how) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigaction(sig, &sa, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigprocmask(how, &one, nullptr);
}

// Burns `ns` of the calling thread's CPU time (bounded: it ends when that time has passed).
extern "C" __attribute__((noinline)) inline double sig_burn(uint64_t ns) {
  const uint64_t end = cpu_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
  volatile double x = 1;
  do {
    for (int i = 0; i < 2000; ++i) x = x * 1.0000001 + 1e-9;
  } while (cpu_ns(CLOCK_THREAD_CPUTIME_ID) < end);
  return x;
}

// Appends one line to $SIG_REPORT (if set).
static inline void report(const char* fmt, ...) {
  const char* path = getenv("SIG_REPORT");
  if (!path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fclose(f);
}
