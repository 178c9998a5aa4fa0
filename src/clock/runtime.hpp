// The runtime: one sampling clock for the process, the signal that carries its samples, the
// threads it samples, and fork/exec handling. The faces, the modern API and the agent each
// own an engine channel; the clock runs while any channel has a table.
//
// Locking: every function here takes the runtime mutex (never held by the signal handler).
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "engine/engine.hpp"

namespace sprofil::rt {

enum class ClockKind : uint8_t {
  kCpu = 0,     // per-thread CPU-time POSIX timers (the default)
  kItimer = 1,  // process-wide ITIMER_PROF, the classic
  kPerf = 2,    // per-thread perf_event task clock, user space (src/clock/perf.hpp)
  kWall = 3,    // per-thread wall-clock timers: on-CPU plus off-CPU time
  kAuto = 4,    // perf where perf_event_open works, else kCpu (resolved at start)
};

struct ClockRequest {
  ClockKind kind = ClockKind::kCpu;
  uint64_t interval_ns = 1000000;  // 1000 Hz
};

// Publishes `table` (may be null) on channel ch and makes the clock match: started with
// `clock` when the first channel gets a table, retuned when `clock` differs from the running
// one, stopped (and the previous signal disposition restored) when no channel has a table.
// On success returns 0 and stores the channel's previous table in *old (the caller destroys
// it; null if none or if it could not be reclaimed safely). On error returns an errno value
// and nothing changed: EBUSY (the signal has a handler of the application's), EAGAIN (no
// timer could be created), EINVAL (bad interval), or the perf_event_open error for kPerf.
int install(engine::Channel ch, engine::Table* table, const ClockRequest& clock,
            engine::Table** old);

// The running clock, if any: returns false when no clock runs. A kAuto request shows as the
// clock it resolved to.
bool running_clock(ClockRequest* out);

// Why the last kAuto request did not get the perf clock ("" if it did, or none was made).
const char* auto_fallback_reason();

// Parses a clock name ("cpu", "itimer", "perf", "wall", "auto"). Returns false if unknown.
bool parse_clock(const char* name, ClockKind* out);
const char* clock_name(ClockKind k);

// Hooks for the agent: called with the runtime mutex held, in the forked child before its
// timers are re-armed, and before an exec (after sampling has been stopped).
struct Hooks {
  void (*after_fork_child)() = nullptr;
  void (*before_exec)() = nullptr;
  void (*after_failed_exec)() = nullptr;
};
void set_hooks(const Hooks& hooks);

// Tests and diagnostics: the signal in use (0 if none), and how many threads have a timer.
int signal_number();
int armed_threads();

// Called by the exec interposers (exec.cpp).
void before_exec();
void after_failed_exec();

}  // namespace sprofil::rt
