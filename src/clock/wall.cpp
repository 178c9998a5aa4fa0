// The wall clock: a per-thread POSIX timer on CLOCK_MONOTONIC (on-CPU plus off-CPU time)
// (timer.cpp). Samples carry their kernel part by the thread's getrusage stime.
#include "clock/clock.hpp"

namespace sprofil::rt {
namespace {

int arm_thread(Slot* s, const ClockRequest& c) {
  return arm_posix_timer(s, CLOCK_MONOTONIC, g_signo, c.interval_ns);
}

}  // namespace

extern const ClockOps g_clock_WALL = {
    /*sigprof_only=*/false,
    /*process_wide=*/false,
    /*splits_system=*/true,
    /*prepare=*/nullptr,
    /*signalless=*/nullptr,
    timers_split_start,
    /*arm_process=*/nullptr,
    arm_thread,
    disarm_timer,
    timer_weight,
    timers_split_stop,
    timers_split_after_fork,
};

}  // namespace sprofil::rt
