// The itimer clock: the process-wide ITIMER_PROF, the classic. Its signal is SIGPROF (the
// only one it can send) and lands in whichever thread runs; it gives no kernel part.
#include <sys/time.h>
#include <time.h>

#include <atomic>
#include <cerrno>

#include "clock/clock.hpp"
#include "util/clock_ns.hpp"

namespace sprofil::rt {
namespace {

// ITIMER_PROF: the interval (0 when another clock runs) and the process CPU periods credited
// so far. The kernel sends at most one SIGPROF per check, and a process-directed SIGPROF that
// is still pending absorbs the next one; so each signal is weighted by the periods of process
// CPU time that elapsed since the last one credited (clock_gettime is async-signal-safe).
std::atomic<uint64_t> g_itimer_interval{0};
std::atomic<uint64_t> g_itimer_credited{0};

uint64_t process_cpu_ns() {
  return util::clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

uint64_t itimer_weight() {
  const uint64_t interval = g_itimer_interval.load(std::memory_order_relaxed);
  if (interval == 0) return 1;
  const uint64_t elapsed = process_cpu_ns() / interval;
  uint64_t credited = g_itimer_credited.load(std::memory_order_relaxed);
  for (;;) {
    if (elapsed <= credited) return 0;  // no whole period since the last: the next gets it
    if (g_itimer_credited.compare_exchange_weak(credited, elapsed, std::memory_order_relaxed))
      return elapsed - credited;
  }
}

int arm_process(const ClockRequest& c) {
  return set_itimer(c.interval_ns);
}

void stop() {
  set_itimer(0);
}

// SI_KERNEL: ITIMER_PROF's signal, ours only while the itimer clock runs. No kernel part.
uint64_t weight(const siginfo_t* si, uint64_t*) {
  if (si->si_code != SI_KERNEL || !g_itimer_interval.load(std::memory_order_relaxed)) return 0;
  return itimer_weight();
}

}  // namespace

int set_itimer(uint64_t interval_ns) {
  if (interval_ns) g_itimer_credited.store(process_cpu_ns() / interval_ns);
  g_itimer_interval.store(interval_ns);
  const timeval tv{static_cast<time_t>(interval_ns / 1000000000u),
                   static_cast<suseconds_t>((interval_ns % 1000000000u) / 1000u)};
  const itimerval it{tv, tv};
  return real_setitimer(ITIMER_PROF, &it, nullptr) == 0 ? 0 : errno;
}

extern constinit const ClockOps g_clock_ITIMER = {
    /*sigprof_only=*/true,
    /*process_wide=*/true,
    /*splits_system=*/false,
    /*prepare=*/nullptr,
    /*signalless=*/nullptr,
    /*start=*/nullptr,
    arm_process,
    /*arm_thread=*/nullptr,
    /*disarm_thread=*/nullptr,
    weight,
    stop,
    /*after_fork_child=*/nullptr,
};

}  // namespace sprofil::rt
