// Shared by the signal-level benchmarks: a clock reading and a fixed, call-free work loop
// whose cost per iteration does not depend on anything the profiler does.
#pragma once

#include <linux/perf_event.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "clock/runtime.hpp"

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

// The benchmarks' arguments: [runs (default 7)] [work iterations (default: about 0.4 s)].
struct Args {
  int runs;
  uint64_t iters;
};

inline Args parse_args(int argc, char** argv) {
  Args a{argc > 1 ? std::max(1, atoi(argv[1])) : 7, argc > 2 ? strtoull(argv[2], nullptr, 10) : 0};
  if (a.iters == 0) a.iters = calibrate_iters(0.4);
  return a;
}

inline uint64_t median(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline double median_d(const std::vector<uint64_t>& v) {
  return static_cast<double>(median(v));
}

// Signals seen by the handlers below, and the timer overruns they carried.
inline std::atomic<uint64_t> g_signals{0}, g_overruns{0};

inline void count_signal(const siginfo_t* si) {
  g_signals.fetch_add(1, std::memory_order_relaxed);
  if (si->si_code == SI_TIMER && si->si_overrun > 0)
    g_overruns.fetch_add(static_cast<uint64_t>(si->si_overrun), std::memory_order_relaxed);
}

// The floor: a handler that only counts.
inline void empty_handler(int, siginfo_t* si, void*) {
  count_signal(si);
}

inline void set_handler(int sig, void (*fn)(int, siginfo_t*, void*)) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = fn;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, nullptr);
}

// Back to SIGPROF's default disposition, dropping a signal still pending.
inline void reset_sigprof() {
  signal(SIGPROF, SIG_IGN);
  signal(SIGPROF, SIG_DFL);
}

// One measured run of work(iters): this thread's and the process's CPU time around it (signal
// delivery and handlers included), and the signals and overruns counted meanwhile.
struct Timed {
  uint64_t thread_ns, process_ns, signals, overruns;
};

inline Timed timed_work(uint64_t iters) {
  g_signals = 0;
  g_overruns = 0;
  const uint64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID), p0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  work(iters);
  const uint64_t t1 = now_ns(CLOCK_THREAD_CPUTIME_ID), p1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  return Timed{t1 - t0, p1 - p0, g_signals.load(), g_overruns.load()};
}

// The cost per signal of a table row, (cpu - base) / signals, and its ratio to the floor: a
// floor row sets the reference for the rows after it.
class FloorRatio {
 public:
  // Returns the cost per signal; `ratio` gets "1.00 (floor)" or the row's cost / the floor's.
  double row(double cpu, double base, double signals, bool is_floor, char (&ratio)[32]) {
    const double per = signals > 0 ? (cpu - base) / signals : 0;
    if (is_floor) floor_ = per;
    if (is_floor)
      std::snprintf(ratio, sizeof ratio, "1.00 (floor)");
    else
      std::snprintf(ratio, sizeof ratio, "%.2f", floor_ > 0 ? per / floor_ : 0.0);
    return per;
  }

 private:
  double floor_ = 0;
};

// A table's preamble: the work loop and the baseline, then the markdown header `head` and its
// alignment row (the first `left` columns left-aligned, the others right-aligned). Returns the
// per-signal costs' reference for the rows.
inline FloorRatio table_start(uint64_t iters, int runs, double base_ns, const char* head,
                              int left) {
  std::printf(
      "work loop: %llu iterations, %d round-robin runs per mode (medians), baseline CPU "
      "%.1f ms\n\n%s\n",
      static_cast<unsigned long long>(iters), runs, base_ns / 1e6, head);
  for (const char* c = head + 1; *c; ++c)
    if (*c == '|') std::printf("%s", left-- > 0 ? "| --- " : "| ---: ");
  std::printf("|\n");
  return FloorRatio{};
}

// A user-space task-clock event of one thread, disabled, overflowing every period_ns and
// waking up at each record: the attributes of the runtime's perf clock (src/clock/perf.cpp).
inline perf_event_attr task_clock_attr(uint64_t period_ns) {
  perf_event_attr a{.type = PERF_TYPE_SOFTWARE,
                    .size = sizeof(perf_event_attr),
                    .config = PERF_COUNT_SW_TASK_CLOCK,
                    .sample_period = period_ns};
  a.disabled = a.exclude_kernel = a.exclude_hv = 1;
  a.wakeup_events = 1;
  return a;
}

// Counts every signal, then runs the sprofil runtime's own handler.
inline void (*g_runtime_handler)(int, siginfo_t*, void*) = nullptr;
inline void counting_wrapper(int sig, siginfo_t* si, void* uc) {
  count_signal(si);
  g_runtime_handler(sig, si, uc);
}

// Puts counting_wrapper in front of the runtime's handler on sig; returns the runtime's
// disposition, to be restored before profiling stops with sprofil::rt::real_sigaction too (the
// interposed sigaction would be the program claiming the signal, and the runtime would move to
// another: after a few rounds, none is left).
inline struct sigaction wrap_runtime_handler(int sig) {
  struct sigaction cur;
  // The real sigaction: the interposed one would show the program's view and move sprofil
  // off its signal (src/clock/interpose_signals.cpp).
  sprofil::rt::real_sigaction(sig, nullptr, &cur);
  g_runtime_handler = cur.sa_sigaction;
  struct sigaction wrap = cur;
  wrap.sa_sigaction = counting_wrapper;
  sprofil::rt::real_sigaction(sig, &wrap, nullptr);
  return cur;
}

}  // namespace bench
