// The clock interface, for the files of src/clock/ only (the rest of the runtime uses
// runtime.hpp). A clock is one ClockOps, defined in its own file (cpu.cpp, wall.cpp,
// itimer.cpp, perf_clock.cpp, sampler.cpp) as g_clock_<NAME> for its row of SPROF_CLOCKS
// (src/format/sprof_format.h); clock_ops() finds it by kind. Adding a clock takes steps
// outside this directory too: docs/architecture.md, "Seams", lists them all.
//
// A ClockOps is three flags and the hooks the runtime calls. Every hook but weight is called
// with the runtime mutex held, or in a forked child before its one thread is armed anew (the
// mutex just re-initialised, every signal blocked), and never from the signal handler.
// weight is called from the signal handler: handler.cpp asks the running clock's weight hook
// whether a signal is one of its samples (each clock tells its own by si_code and its marks;
// the perf clock's also takes the CPU-time timer of a thread that got no event) and what it
// weighs, so it must be async-signal-safe (handler.cpp's audit lists what each one does).
#pragma once

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <time.h>

#include <atomic>
#include <cstdint>

#include "clock/runtime.hpp"
#include "util/mutex.hpp"
#include "util/nocopy.hpp"

namespace sprofil::rt {

namespace perf {
struct Event;
}

// One thread the runtime samples, and what it armed for it (the registry: threads.cpp).
struct Slot {
  pid_t tid;
  bool has_timer;
  timer_t timer;
  perf::Event* event;  // kPerf: heap-allocated (the ring drainer keeps pointers to it)
  void* rec;           // kSampler: the thread's record (sampler.cpp)
};

struct ClockOps {
  bool sigprof_only;   // its signal can only be SIGPROF (ITIMER_PROF sends no other)
  bool process_wide;   // one timer for the process (arm_process), none per thread
  bool splits_system;  // its samples carry their kernel part (clock_splits_system)
  // Process-wide checks and setup before the signal is chosen; 0 or an errno value.
  int (*prepare)(const ClockRequest& c);
  // After prepare: true when its samples reach the profile without a signal (perf's drain
  // mode: the record parent reads them), so none is taken; nullptr: it takes one.
  bool (*signalless)();
  // After the handler is installed, before any thread is armed; 0 or an errno value.
  int (*start)(const ClockRequest& c);
  // Arms the process (process_wide) or one thread; 0 or an errno value.
  int (*arm_process)(const ClockRequest& c);
  int (*arm_thread)(Slot* s, const ClockRequest& c);
  // Undoes arm_thread for one thread (its timer, event or record), if it armed one.
  void (*disarm_thread)(Slot* s);
  // In the handler: the weight of signal `si` if it is one of this clock's samples (0 if not,
  // or if no whole period elapsed since the last one credited: its time goes to the next), and
  // in *system_w the part of it spent in the kernel (splits_system). Signal-safe.
  uint64_t (*weight)(const siginfo_t* si, uint64_t* system_w);
  // After every thread is disarmed: undoes arm_process and start.
  void (*stop)();
  // In a forked child (only the forking thread lives), before it is armed anew.
  void (*after_fork_child)(const ClockRequest& c);
  // Before an exec, with the runtime mutex: true when the exec itself ends this process's
  // sampling with nothing to stop or flush (perf's drain mode, perf.hpp's
  // exec_removes_events); nullptr: the exec stops the clock first.
  bool (*ends_at_exec)();
};

// The clock of kind k (not kAuto: resolve it first with resolve_auto). Signal-safe.
const ClockOps& clock_ops(ClockKind k);

// --- what the clock files share (runtime.cpp, threads.cpp, timer.cpp) --------------------

// Marks the sigevent of our own timers, so that the handler can tell their signals apart.
extern const char g_cookie;

// One line on stderr (unless SPROFIL_QUIET): sprofil moved out of the program's way or stopped.
void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
pid_t gettid_();
timespec to_ts(uint64_t ns);
// Uniform in (0, period]: the random phase of a thread's first period. With the runtime mutex.
uint64_t random_phase(uint64_t period);
// In a forked child: the next random_phase seeds its generator anew (from the time and the
// child's pid). Inherited, every child of one parent drew the same phases: a shell's forked
// children all got a period at their exec, or none did.
void reseed_after_fork();

// A thread of the runtime itself (perf's ring drainer, the sampler clock's re-armer;
// threads.cpp): made with the real pthread_create, so it is never registered or sampled; it
// blocks every signal and announces its tid first thing (runtime_thread_begin), polls `stop`,
// and is joined with the real pthread_join (the interposed one takes g_mu). Start and stop
// with g_mu held.
struct RuntimeThread {
  pthread_t thread;
  bool running;            // g_mu
  std::atomic<bool> stop;  // set by stop_runtime_thread
  std::atomic<pid_t> tid;  // 0 until it runs
};
int start_runtime_thread(RuntimeThread* t, void* (*fn)(void*));
void stop_runtime_thread(RuntimeThread* t);
// In a forked child: the thread was the parent's (not joined, nothing to free).
void forget_runtime_thread(RuntimeThread* t);
// First thing in the thread's function: every signal blocked, the tid announced.
void runtime_thread_begin(RuntimeThread* t);
// How many run now (g_mu).
int runtime_threads();

// Calls around which the runtime's own threads end (alone.cpp): those that the kernel allows a
// process of one thread only (unshare of a user namespace, and CLONE_THREAD, CLONE_SIGHAND,
// CLONE_VM; setns into a user or a mount namespace, nstype 0: any), and those that change the
// calling thread's credentials (capset, prctl's KEEPCAPS, SECUREBITS, CAPBSET_DROP and
// CAP_AMBIENT changes; the set*id family and setgroups, which glibc applies to every thread
// and aborts the process where one thread's result differs). needs_one_thread says whether
// the system call nr with the arguments a[0..5] is one; call_alone runs call(a) with the
// runtime's threads ended around it (the clock stopped and started again, by a thread that
// then has the caller's credentials; the live service's thread by its hooks), and returns its
// result (errno as it set it).
bool needs_one_thread(long nr, const long* a);
long call_alone(long nr, long (*call)(const long* a), const long* a);

// POSIX timers (timer.cpp), for the cpu and wall clocks and for perf-clock threads that get
// no event: arms s with a timer on clock `cid` signalling `signo` every interval_ns.
int arm_posix_timer(Slot* s, clockid_t cid, int signo, uint64_t interval_ns);
// The CPU-time clock of any thread of this process (the kernel's MAKE_THREAD_CPUCLOCK).
clockid_t thread_cpu_clock(pid_t tid);
// Start and stop of the timers' kernel-part accounting: the cpu and wall clocks' start, stop
// and after_fork_child operations (they differ only in the clock their timers count).
int timers_split_start(const ClockRequest& c);
void timers_split_stop();
void timers_split_after_fork(const ClockRequest& c);
// The cpu and wall clocks' weight hook: a SI_TIMER signal of our timers, its weight and its
// kernel part, else 0. Signal-safe.
uint64_t timer_weight(const siginfo_t* si, uint64_t* system_w);
// The cpu and wall clocks' disarm hook: deletes the thread's timer, if it has one.
void disarm_timer(Slot* s);
// A clock of per-thread POSIX timers (cpu, wall): `arm_thread` gives each thread its timer
// on the clock it counts; the rest is timer.cpp's. Constant, so that the table of clocks is
// set before any constructor can start one (declare the result constinit).
constexpr ClockOps timer_clock(int (*arm_thread)(Slot* s, const ClockRequest& c)) {
  return ClockOps{/*sigprof_only=*/false,
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
                  timers_split_after_fork};
}
// In the handler: the kernel part of a sample of weight w from the thread's getrusage stime
// (while timers_split_start's interval is set, else 0). Signal-safe.
uint64_t timers_system_part(uint64_t w);

// The sampler clock (sampler.cpp): its period while it runs, else 0. Whether it runs (the
// waiting calls' interposers: inline, one relaxed load on their fast path). Signal-safe.
extern std::atomic<uint64_t> g_sampler_interval;
inline bool sampler_runs() {
  return g_sampler_interval.load(std::memory_order_relaxed) != 0;
}

// ITIMER_PROF (itimer.cpp). Arms (interval_ns) or disarms (0) the real ITIMER_PROF; 0 or an errno
// value.
int set_itimer(uint64_t interval_ns);

// kAuto (perf_clock.cpp): the perf clock where perf_event_open works, else kSampler, and why.
ClockRequest resolve_auto(const ClockRequest& c);
const char* auto_reason();

// The signal handler and the choice of its signal (handler.cpp). With the runtime mutex.
int choose_signal(const ClockOps& ops, int* err);
int install_handler(int signo);
void restore_handler(int signo);
bool handler_is_ours(const struct sigaction& sa);

// The thread registry (threads.cpp). With the runtime mutex.
extern Slot* g_slots;
extern int g_nslots;
Slot* find_slot(pid_t tid);
Slot* add_slot(pid_t tid);
void remove_slot(Slot* s);
void disarm_thread(Slot* s);
void scan_threads();
void reap_locked();
void check_masks_locked();
void forget_slots_after_fork();
bool threads_init();  // the exit key; false if none could be made
void thread_started();
// Arms one thread for the running clock (nothing for a process-wide one) (runtime.cpp).
int arm_one(Slot* s);
// Arms the process (a process-wide clock) or every known thread; a thread that has exited
// since it was seen is forgotten. Fails only if the calling thread itself cannot be armed.
int arm_all();
// Starts the clock `c` (kAuto resolved) on a signal of its own, or stops the running one
// (its pending samples discarded, the program's disposition of the signal restored). With
// g_mu (runtime.cpp); used by fork.cpp, exec.cpp and program_view.cpp.
int start_clock(const ClockRequest& c);
void stop_clock();
// Registers the fork handlers (fork.cpp), once, from the runtime's constructor.
void install_fork_handlers();

// The program's seccomp filter (sandbox.cpp). After enter_sandbox() (the interposed prctl and
// syscall, before the filter is installed) the runtime makes no system call of its own:
// sandboxed() is true (an atomic: safe in the signal handler) and every hook returns at once.
bool sandboxed();
void enter_sandbox();
// A vfork child (it shares our memory) that installed a filter: its exec passes an
// environment without sprofil, and ours stays as it was.
bool vfork_child_sandboxed();

// The environment an exec or a spawn passes (exec_env.cpp). Whether it must be envp without
// sprofil (unprofiled_env): a seccomp filter (this process's, or that of a vfork child calling
// the exec), or libsprofil not readable at its path in envp's LD_PRELOAD (a changed root or
// user).
bool exec_unprofiled(char* const envp[]);
// Whether an environment entry is one of sprofil's variables (SPROFIL_*).
bool is_sprofil_var(const char* entry);
// LD_PRELOAD's value without libsprofil (entries separated by ':' or ' ', kept with ':'),
// into `out` (at least as long as value).
void strip_preload(const char* value, char* out);
// For unprofiled_env: the number of entries of envp, and the length of its LD_PRELOAD entry
// (0 if none).
size_t unprofiled_env_sizes(char* const envp[], size_t* preload_len);
// envp without sprofil's variables and with libsprofil out of LD_PRELOAD, into `out` (n + 1
// slots) and `preload` (the LD_PRELOAD entry's length + 1 bytes).
void unprofiled_env(char* const envp[], char** out, char* preload);

// The runtime's state (runtime.cpp): guarded by g_mu unless atomic.
extern pthread_mutex_t g_mu;
extern bool g_active;
extern ClockRequest g_clock;
extern int g_signo;
extern uint64_t g_claimed;  // bit s-1: the program put its own handler (or SIG_IGN) on s
extern pid_t g_pid;
extern struct sigaction g_prev_action;
extern bool g_itimer_taken;  // the program uses ITIMER_PROF or SIGPROF: no itimer clock
extern Hooks g_hooks;        // set_hooks(): the agent's fork and exec hooks

// The runtime mutex with every signal blocked in the holding thread (see handler.cpp's
// audit): a program handler that calls an interposed function can never interrupt a holder
// of g_mu on its own thread.
struct BlockAll : util::NoCopy {
  BlockAll();
  ~BlockAll();
  sigset_t saved;
};
// The mask is restored after the mutex is released (members are destroyed in reverse).
struct Lock {
  BlockAll blocked;
  util::MutexGuard held{&g_mu};
};

}  // namespace sprofil::rt
