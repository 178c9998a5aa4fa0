// Signal-safety audit of on_signal(), the profiling signal handler:
// - It reads the siginfo and ucontext the kernel gave it and asks the running clock's weight
//   hook (ClockOps::weight, clock.hpp; the kind from an atomic, the hooks in a constant table)
//   whether the signal is one of its samples: the cpu and wall clocks' timer_weight()
//   (timer.cpp): SI_TIMER with si_value == &g_cookie (our POSIX timers); the sampler clock's
//   (sampler.cpp): SI_TIMER from a live record of its never-freed pool (a walk of its chunk
//   list, atomic loads); the perf clock's (perf_clock.cpp): POLL_IN/POLL_HUP from an fd in
//   perf's bitmap (perf::is_ours: atomic loads), or timer_weight() for a thread that got no
//   event; the itimer clock's (itimer.cpp): SI_KERNEL. Anything else (kill(), sigqueue(),
//   tgkill(), another timer on the same signal, another clock's late signal) weighs 0 and is
//   dropped uncounted.
// - The weight: si_overrun (timers), and their kernel part: getrusage(RUSAGE_THREAD) (a plain
//   system call, not on POSIX's list but a raw syscall wrapper with no library state; errno is
//   restored) against initial-exec TLS and two atomics; for perf, perf::signal_weight() (the
//   weight and its kernel part, perf::credit): clock_gettime(CLOCK_MONOTONIC_RAW) and, unless
//   perf::overflow_without_read() shows the counter (plain arithmetic on initial-exec TLS),
//   read(2) of the event's counter; clock_gettime(CLOCK_THREAD_CPUTIME_ID) (async-signal-safe)
//   when the weight would exceed one period (perf::steal_free), and
//   ioctl(PERF_EVENT_IOC_PERIOD) for jitter and, at a
//   thread's first sample, to end its random first period, plain system calls with no
//   library state (read is async-signal-safe by POSIX; ioctl is a raw syscall wrapper), with
//   per-thread state in initial-exec TLS, the period and generation in atomics, and per fd
//   the event's phase and its thread's CPU clock at the opening in atomics; for ITIMER_PROF,
//   clock_gettime(2) (async-signal-safe) and a CAS on an atomic; for the sampler clock,
//   clock_gettime(2) of the thread's CPU time and CLOCK_MONOTONIC (async-signal-safe),
//   timer_settime(2) to re-arm the thread's one-shot timer (a plain system call), atomics in
//   the thread's record, and the timers' getrusage above; when it parks an idle thread, an
//   atomic increment and a FUTEX_WAKE (a raw system call that never waits) for the sampler
//   thread. That call, like the runtime's other syscall() calls, passes through sprofil's own
//   syscall interposer (sandbox.cpp): reads of its arguments, two compares and the real
//   function's pointer, resolved when the library loads (never dlsym here).
// - Then engine::global().sample(), whose own audit is at the top of engine/engine.cpp
//   (atomics and immutable, safely published tables only).
// - Under the program's seccomp filter (sandboxed(), an atomic load) it returns at once.
// - It saves and restores errno. It takes no lock, allocates nothing, and reads no runtime
//   state guarded by g_mu: every value it reads is an atomic or was published before the
//   signal was first armed (g_cookie is a constant).
// - It runs with every signal blocked (sa_mask full): no handler of the program's can run on
//   top of it and siglongjmp out while the engine's reader count is raised.
// Everything else in src/clock runs outside the handler under g_mu, with every signal blocked
// in the thread that holds it (Lock, clock.hpp): a program handler that calls an interposed
// function (sigaction, setitimer...) can never interrupt a holder of g_mu on its own thread.
//
// This file: the handler, and the choice and installation of the signal; the weight of each
// clock's signals is its own file's hook.
#include <signal.h>
#include <ucontext.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "clock/clock.hpp"
#include "engine/engine.hpp"

namespace sprofil::rt {
namespace {

uintptr_t pc_of(void* ucv) {
  auto* uc = static_cast<ucontext_t*>(ucv);
#if defined(__x86_64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.pc);
#elif defined(__i386__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_EIP]);
#else
#error "sprofil: unsupported architecture (add its pc register here)"
#endif
}

void on_signal(int, siginfo_t* si, void* uc) {
  // Under the program's seccomp filter the weights' system calls may be denied: a signal
  // still in flight when the clock stopped there is dropped (sandbox.cpp).
  if (sandboxed()) return;
  const int saved_errno = errno;
  uint64_t system_w = 0;
  // The running clock's weight hook tells its samples from anything else (kill(),
  // sigqueue(), tgkill(), another clock's late signal) and weighs them.
  if (const uint64_t w = clock_ops(last_clock_kind()).weight(si, &system_w))
    engine::global().sample(pc_of(uc), w, system_w);
  errno = saved_errno;
}

bool handler_is_free(const struct sigaction& sa) {
  if (sa.sa_flags & SA_SIGINFO) return sa.sa_sigaction == on_signal;
  return sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN;
}

// SPROFIL_SIGNAL names the signal: a number, "SIGPROF", or "SIGRTMIN+n" / "SIGRTMAX-n".
int configured_signal() {
  const char* s = secure_getenv("SPROFIL_SIGNAL");
  if (!s || !*s) return 0;
  if (strncmp(s, "SIG", 3) == 0) s += 3;
  if (strcmp(s, "PROF") == 0) return SIGPROF;
  if (strncmp(s, "RTMIN", 5) == 0) return SIGRTMIN + (s[5] == '+' ? atoi(s + 6) : 0);
  if (strncmp(s, "RTMAX", 5) == 0) return SIGRTMAX - (s[5] == '-' ? atoi(s + 6) : 0);
  const int n = atoi(s);
  return n > 0 && n < NSIG ? n : -1;
}

bool claimed(int s) {
  return s >= 1 && s <= 64 && ((g_claimed >> (s - 1)) & 1);
}

}  // namespace

bool handler_is_ours(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_signal;
}

// SIGPROF unless the application has a handler on it (or SPROFIL_SIGNAL says otherwise);
// then the highest free real-time signal. ITIMER_PROF can only send SIGPROF. A signal the
// program has claimed through the interposers (even with SIG_IGN) is never free.
int choose_signal(const ClockOps& ops, int* err) {
  const int want = configured_signal();
  if (want < 0 || (want > 0 && ops.sigprof_only && want != SIGPROF)) {
    *err = EINVAL;
    return 0;
  }
  struct sigaction cur;
  if (want > 0) {
    if (real_sigaction(want, nullptr, &cur) != 0) {
      *err = EINVAL;
      return 0;
    }
    if (!handler_is_free(cur) || claimed(want)) *err = EBUSY;
    return *err ? 0 : want;
  }
  if (!claimed(SIGPROF) && real_sigaction(SIGPROF, nullptr, &cur) == 0 && handler_is_free(cur))
    return SIGPROF;
  if (ops.sigprof_only) {
    *err = EBUSY;
    return 0;
  }
  for (int s = SIGRTMAX - 2; s >= SIGRTMIN + 4; --s) {
    if (!claimed(s) && real_sigaction(s, nullptr, &cur) == 0 && cur.sa_handler == SIG_DFL &&
        !(cur.sa_flags & SA_SIGINFO))
      return s;
  }
  *err = EBUSY;
  return 0;
}

int install_handler(int signo) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&sa.sa_mask);  // nothing interrupts the handler (see the audit above)
  struct sigaction prev;
  if (real_sigaction(signo, &sa, &prev) != 0) return errno;
  if (!handler_is_ours(prev)) g_prev_action = prev;
  return 0;
}

// Setting a signal to SIG_IGN discards it wherever it is pending (POSIX), so no sample that
// was already queued can reach the restored disposition (SIG_DFL would kill the process).
void restore_handler(int signo) {
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  real_sigaction(signo, &ign, nullptr);
  real_sigaction(signo, &g_prev_action, nullptr);
}

}  // namespace sprofil::rt
