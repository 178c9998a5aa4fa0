// The runtime: one sampling clock for the process, the signal that carries its samples, the
// threads it samples, and fork/exec handling. The faces, the modern API and the agent each
// own an engine channel; the clock runs while any channel has a table.
//
// Locking: every function here takes the runtime mutex (never held by the signal handler).
#pragma once

#include <signal.h>
#include <sys/time.h>
#include <sys/types.h>

#include <cstdint>

#include "engine/engine.hpp"

namespace sprofil::rt {

// The numbers are SPROF_CLOCKS' ids (src/format/sprof_format.h), pinned by static_asserts in
// runtime.cpp; each clock's implementation is a ClockOps in its own file (clock.hpp).
enum class ClockKind : uint8_t {
  kCpu = 0,      // per-thread CPU-time POSIX timers (the default)
  kItimer = 1,   // process-wide ITIMER_PROF, the classic
  kPerf = 2,     // per-thread perf_event task clock, user space (src/clock/perf.hpp)
  kWall = 3,     // per-thread wall-clock timers: on-CPU plus off-CPU time
  kSampler = 4,  // per-thread jittered hrtimers, weighted by each thread's CPU time
  kAuto = 5,     // perf where perf_event_open works, else kSampler (resolved at start)
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
// and nothing changed: EBUSY (the signal has a handler of the application's, or another
// channel's clock runs with a different kind or rate: a session never changes another's
// clock), EAGAIN (no timer could be created), EINVAL (bad interval), or the perf_event_open
// error for kPerf.
int install(engine::Channel ch, engine::Table* table, const ClockRequest& clock,
            engine::Table** old);

// The running clock, if any: returns false when no clock runs. A kAuto request shows as the
// clock it resolved to.
bool running_clock(ClockRequest* out);
// The kind of the clock last started (after any move, e.g. itimer to cpu), without taking the
// runtime mutex: safe in hooks the runtime calls with it held.
ClockKind last_clock_kind();

// Whether the clock k tells the kernel part of its samples (engine::Region::system): kPerf
// (from its counter, perf::credit), kCpu, kWall and kSampler (the thread's getrusage stime,
// by tick).
// kItimer does not (a process-wide timer: its signal lands in any thread) and gives system
// part 0: kernel time is charged to the user pc the thread returns to.
// kAuto: ask about the clock it resolved to (running_clock / last_clock_kind).
bool clock_splits_system(ClockKind k);

// Why the last kAuto request did not get the perf clock ("" if it did, or none was made).
const char* auto_fallback_reason();

// Parses a clock name ("cpu", "itimer", "perf", "wall", "sampler", "auto"). Returns false if
// unknown.
bool parse_clock(const char* name, ClockKind* out);
const char* clock_name(ClockKind k);

// At an _exit (the agent's interposer): where a signal per sample runs the perf clock, the
// calling thread's kernel time since its last signal is credited, as at a clean exit's stop.
// The thread ends with no stop of the clock, and that time, most of a short system-call-bound
// process's, was not counted. Signal-safe: only tries the runtime mutex (held: nothing done);
// nothing in a vfork child.
void credit_at_underscore_exit();

// Hooks for the agent: called with the runtime mutex held, in the forked child before its
// timers are re-armed, before an exec (after sampling has been stopped and drained), and
// after a failed exec (before sampling restarts). silent: asked before the runtime writes a
// line on stderr (note()); true keeps it out of the program's stderr (the run it profiled for
// has ended, and natively nothing is printed there).
struct Hooks {
  void (*after_fork_child)() = nullptr;
  void (*before_exec)() = nullptr;
  void (*after_failed_exec)() = nullptr;
  bool (*silent)() = nullptr;
};
void set_hooks(const Hooks& hooks);
// What the agent and the live service do at two process-wide events, each callback optional:
// - sandboxed: the program installs a seccomp filter (sandbox.cpp), before the runtime stops;
// - pause, resume: around a system call that the kernel allows a process of one thread only
//   (alone.cpp: unshare, setns, credential changes): pause ends the part's thread (false: none
//   ran), resume starts it again.
// Called without the runtime mutex, in the order added (at most kMaxProcessHooks; the same set
// added twice is kept once).
struct ProcessHooks {
  void (*sandboxed)() = nullptr;
  bool (*pause)() = nullptr;
  void (*resume)() = nullptr;
};
constexpr int kMaxProcessHooks = 4;
void add_process_hooks(const ProcessHooks& h);
// A copy of the sets added (empty slots all null), taken under the runtime mutex.
void process_hooks(ProcessHooks out[kMaxProcessHooks]);

// Tests and diagnostics: the signal in use (0 if none), and how many threads have a timer.
int signal_number();
int armed_threads();

// Called by the exec interposers (exec.cpp).
void before_exec();
void after_failed_exec();

// --- The program's view of signals, timers and masks (interpose_signals.cpp) -------------
// The signal sprofil's clock uses now, 0 if none. Signal-safe (an atomic load).
int current_signal();

// The real libc functions, never the interposers (sprofil's own code must use these).
int real_sigaction(int sig, const struct sigaction* act, struct sigaction* old);
int real_sigmask(int how, const sigset_t* set, sigset_t* old);  // pthread_sigmask: errno value
int real_setitimer(int which, const itimerval* v, itimerval* old);
int real_timer_create(clockid_t clock, sigevent* sev, timer_t* id);

// The program's sigaction on sprofil's current signal: the program sees (in *old) what it
// set or the default, never sprofil's handler; SIG_DFL is recorded and sprofil keeps the
// signal; a handler or SIG_IGN claims it: sprofil moves to a free real-time signal and the
// program gets the real disposition it asked for. Returns false (nothing done) if sig is not
// sprofil's; the caller then calls the real sigaction.
bool program_sigaction(int sig, const struct sigaction* act, struct sigaction* old);

// The program creates a POSIX timer that signals sprofil's current signal: the signal is the
// program's from now on (as if it had set its disposition), and sprofil moves away.
void program_timer_signal(int sig);

// The program's setitimer/getitimer(ITIMER_PROF) while sprofil's clock is the itimer: a
// program timer moves sprofil to the cpu clock (said once) and the program sees only its own
// timer. Return false when sprofil is not concerned (the caller calls the real function).
bool program_setitimer(const itimerval* v, itimerval* old, int* rc);
bool program_getitimer(itimerval* v);

// The calling thread's signals that the program blocked but sprofil keeps unblocked (bit
// s-1); a new thread inherits its creator's (pthread_create).
uint64_t virtual_blocked();
void set_virtual_blocked(uint64_t v);

// Forgets threads that ended without running their key destructor (a raw SYS_exit): their
// timers and perf events are released. Called after pthread_join and when threads start.
void reap_threads();

// Warns once (stderr) that sprofil's signal is blocked in a thread that blocked it behind the
// interposers' back (raw rt_sigprocmask): that thread is not sampled.
void check_masks();

}  // namespace sprofil::rt
