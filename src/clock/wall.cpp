// The wall clock: a per-thread POSIX timer on CLOCK_MONOTONIC (on-CPU plus off-CPU time)
// (timer.cpp). Samples carry their kernel part by the thread's getrusage stime.
#include "clock/clock.hpp"

namespace sprofil::rt {
namespace {

int arm_thread(Slot* s, const ClockRequest& c) {
  return arm_posix_timer(s, CLOCK_MONOTONIC, g_signo, c.interval_ns);
}

}  // namespace

extern constinit const ClockOps g_clock_WALL = timer_clock(arm_thread);

}  // namespace sprofil::rt
