// The cpu clock (the default): a per-thread POSIX timer on the thread's CPU-time clock
// (timer.cpp). Samples carry their kernel part by the thread's getrusage stime.
#include "clock/clock.hpp"

namespace sprofil::rt {
namespace {

int arm_thread(Slot* s, const ClockRequest& c) {
  return arm_posix_timer(s, thread_cpu_clock(s->tid), g_signo, c.interval_ns);
}

}  // namespace

extern constinit const ClockOps g_clock_CPU = timer_clock(arm_thread);

}  // namespace sprofil::rt
