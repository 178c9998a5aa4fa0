// The cpu clock (the default): a per-thread POSIX timer on the thread's CPU-time clock
// (timer.cpp). Samples carry their kernel part by the thread's getrusage stime.
#include "clock/clock.hpp"

namespace sprofil::rt {
namespace {

int start(const ClockRequest& c) {
  timers_split_start(c.interval_ns);
  return 0;
}

int arm_thread(Slot* s, const ClockRequest& c) {
  return arm_posix_timer(s, thread_cpu_clock(s->tid), g_signo, c.interval_ns);
}

void stop() {
  timers_split_stop();
}

void after_fork_child(const ClockRequest&) {
  timers_split_new_generation();
}

}  // namespace

extern const ClockOps g_clock_CPU = {
    /*sigprof_only=*/false,
    /*process_wide=*/false,
    /*splits_system=*/true,
    /*prepare=*/nullptr,     start,
    /*arm_process=*/nullptr, arm_thread, stop, after_fork_child,
};

}  // namespace sprofil::rt
