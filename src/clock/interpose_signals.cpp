// Interposed signal, mask and timer functions: with sprofil loaded, the program's view of its
// signals, masks and timers is what it would be without sprofil (docs/agent.md, "Signals,
// timers and masks"). Each interposer costs one atomic load when the signal or timer it is
// given is not sprofil's, and then calls the real function (dlsym RTLD_NEXT).
// - sigaction, signal, bsd_signal, sysv_signal, sigset, siginterrupt: on sprofil's signal the
//   program reads what it set (or the default), SIG_DFL is recorded while sprofil keeps the
//   signal, and a handler or SIG_IGN makes sprofil move to another signal (runtime.cpp,
//   program_sigaction). glibc's signal() and friends call sigaction internally, not through
//   the PLT, so each needs its own interposer.
// - sigprocmask, pthread_sigmask: sprofil's signal is removed from what the program blocks
//   (else a program that blocks everything before creating its workers is never sampled);
//   the program still reads its own view in the old set (a per-thread virtual bit). The same
//   for the BSD and System V calls glibc makes without the PLT: sigsetmask, sigblock,
//   siggetmask, sighold, sigrelse (and sigignore as signal()).
// - sigignore: as signal(SIG_IGN).
// - sigsuspend: sprofil's signal is added to the mask (a sample must not end the wait); the
//   same for sigpause (__xpg_sigpause, __sigpause), which glibc waits in without the PLT.
// - sigwait, sigwaitinfo, sigtimedwait, signalfd: sprofil's signal is removed from the set
//   (the program never receives a sample as its own signal); sigwaitinfo and sigtimedwait,
//   which a handled signal ends with EINTR, block it while the sampler clock runs (quiet.hpp).
// - setitimer, getitimer: ITIMER_PROF belongs to the program (runtime.cpp, program_setitimer).
// - timer_create: a program timer that signals sprofil's signal makes it the program's
//   (program_timer_signal); sprofil's own timers are created with the real one.
// - pthread_join: threads that ended with a raw SYS_exit are reaped (their fd or timer freed).
// All of these are async-signal-safe where POSIX says the real one is: the lock-free paths
// use atomics and initial-exec TLS; the paths that take the runtime mutex do so with every
// signal blocked, and no holder of that mutex can be interrupted by a handler.
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/time.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "clock/interpose.hpp"
#include "clock/quiet.hpp"
#include "clock/runtime.hpp"

namespace sprofil::rt {
namespace {

using sigaction_fn = int (*)(int, const struct sigaction*, struct sigaction*);
using sigmask_fn = int (*)(int, const sigset_t*, sigset_t*);
using setitimer_fn = int (*)(int, const itimerval*, itimerval*);
using getitimer_fn = int (*)(int, itimerval*);
using handler_fn = sighandler_t (*)(int, sighandler_t);
using siginterrupt_fn = int (*)(int, int);
using sigsuspend_fn = int (*)(const sigset_t*);
using sigwait_fn = int (*)(const sigset_t*, int*);
using sigwaitinfo_fn = int (*)(const sigset_t*, siginfo_t*);
using sigtimedwait_fn = int (*)(const sigset_t*, siginfo_t*, const timespec*);
using signalfd_fn = int (*)(int, const sigset_t*, int);
using join_fn = int (*)(pthread_t, void**);

std::atomic<sigaction_fn> g_sigaction{nullptr};
std::atomic<sigmask_fn> g_pthread_sigmask{nullptr}, g_sigprocmask{nullptr};
std::atomic<setitimer_fn> g_setitimer{nullptr};
std::atomic<getitimer_fn> g_getitimer{nullptr};
std::atomic<handler_fn> g_signal{nullptr}, g_bsd_signal{nullptr}, g_sysv_signal{nullptr},
    g_sigset{nullptr};
std::atomic<siginterrupt_fn> g_siginterrupt{nullptr};
std::atomic<sigsuspend_fn> g_sigsuspend{nullptr};
std::atomic<sigwait_fn> g_sigwait{nullptr};
std::atomic<sigwaitinfo_fn> g_sigwaitinfo{nullptr};
std::atomic<sigtimedwait_fn> g_sigtimedwait{nullptr};
std::atomic<signalfd_fn> g_signalfd{nullptr};
std::atomic<join_fn> g_join{nullptr};

// Per thread: the signals the program blocked that sprofil keeps unblocked (bit s-1).
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_vblocked;

uint64_t bit(int s) {
  return s >= 1 && s <= 64 ? uint64_t{1} << (s - 1) : 0;
}

// The set without sprofil's signal s, in *copy; or set itself if s is not in it.
const sigset_t* without(const sigset_t* set, int s, sigset_t* copy) {
  if (!set || s <= 0 || !sigismember(set, s)) return set;
  *copy = *set;
  sigdelset(copy, s);
  return copy;
}

// The mask change of pthread_sigmask/sigprocmask, with sprofil's signal kept unblocked.
int masked(sigmask_fn real, int how, const sigset_t* set, sigset_t* old) {
  const int s = current_signal();
  if (s <= 0 || (how != SIG_BLOCK && how != SIG_UNBLOCK && how != SIG_SETMASK))
    return real(how, set, old);
  const uint64_t b = bit(s);
  const uint64_t before = t_vblocked;
  sigset_t copy;
  const sigset_t* use = set;
  if (set) {
    const bool in = sigismember(set, s) == 1;
    if (how == SIG_SETMASK)
      t_vblocked = in ? (t_vblocked | b) : (t_vblocked & ~b);
    else if (how == SIG_BLOCK && in)
      t_vblocked |= b;
    else if (how == SIG_UNBLOCK && in)
      t_vblocked &= ~b;
    if (how != SIG_UNBLOCK) use = without(set, s, &copy);
  }
  const int rc = real(how, use, old);
  if (rc != 0 && set) t_vblocked = before;
  if (rc == 0 && old && (before & b)) sigaddset(old, s);
  return rc;
}

// The program's mask change (pthread_sigmask's semantics) with sprofil's signal kept unblocked.
int program_mask(int how, const sigset_t* set, sigset_t* old) {
  return masked(real_fn(g_pthread_sigmask, "pthread_sigmask"), how, set, old);
}

int do_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (program_sigaction(sig, act, old)) return 0;
  return real_fn(g_sigaction, "sigaction")(sig, act, old);
}

// signal()-style interposers on sprofil's signal: the same through do_sigaction.
sighandler_t set_handler(int sig, sighandler_t h, int flags, bool mask_self) {
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  act.sa_handler = h;
  act.sa_flags = flags;
  sigemptyset(&act.sa_mask);
  if (mask_self) sigaddset(&act.sa_mask, sig);
  if (do_sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

}  // namespace

int real_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return real_fn(g_sigaction, "sigaction")(sig, act, old);
}

int real_sigmask(int how, const sigset_t* set, sigset_t* old) {
  return real_fn(g_pthread_sigmask, "pthread_sigmask")(how, set, old);
}

int real_timer_create(clockid_t clock, sigevent* sev, timer_t* id) {
  using timer_create_fn = int (*)(clockid_t, sigevent*, timer_t*);
  static std::atomic<timer_create_fn> real{nullptr};
  return real_fn(real, "timer_create")(clock, sev, id);
}

int real_setitimer(int which, const itimerval* v, itimerval* old) {
  return real_fn(g_setitimer, "setitimer")(which, v, old);
}

uint64_t virtual_blocked() {
  return t_vblocked;
}

void set_virtual_blocked(uint64_t v) {
  t_vblocked = v;
}

}  // namespace sprofil::rt

using namespace sprofil::rt;

#include "util/export.hpp"

SPROFIL_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) __THROW {
  return do_sigaction(sig, act, old);
}

SPROFIL_EXPORT sighandler_t signal(int sig, sighandler_t h) __THROW {
  if (sig <= 0 || sig != current_signal()) return real_fn(g_signal, "signal")(sig, h);
  return set_handler(sig, h, SA_RESTART, true);  // glibc's BSD semantics
}

SPROFIL_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h) __THROW {
  if (sig <= 0 || sig != current_signal()) return real_fn(g_bsd_signal, "bsd_signal")(sig, h);
  return set_handler(sig, h, SA_RESTART, true);
}

SPROFIL_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h) __THROW {
  if (sig <= 0 || sig != current_signal()) return real_fn(g_sysv_signal, "sysv_signal")(sig, h);
  return set_handler(sig, h, SA_RESETHAND | SA_NODEFER, false);
}

SPROFIL_EXPORT sighandler_t sigset(int sig, sighandler_t disp) __THROW {
  if (sig <= 0 || sig != current_signal()) return real_fn(g_sigset, "sigset")(sig, disp);
  sigset_t one, old;
  sigemptyset(&one);
  sigaddset(&one, sig);
  struct sigaction cur;
  if (disp == SIG_HOLD) {
    if (do_sigaction(sig, nullptr, &cur) != 0) return SIG_ERR;
    if (program_mask(SIG_BLOCK, &one, &old) != 0) return SIG_ERR;
    return sigismember(&old, sig) ? SIG_HOLD : cur.sa_handler;
  }
  const sighandler_t prev = set_handler(sig, disp, 0, false);
  if (prev == SIG_ERR) return SIG_ERR;
  if (program_mask(SIG_UNBLOCK, &one, &old) != 0) return SIG_ERR;
  return sigismember(&old, sig) ? SIG_HOLD : prev;
}

SPROFIL_EXPORT int siginterrupt(int sig, int flag) __THROW {
  if (sig <= 0 || sig != current_signal())
    return real_fn(g_siginterrupt, "siginterrupt")(sig, flag);
  struct sigaction act;
  if (do_sigaction(sig, nullptr, &act) != 0) return -1;
  if (flag)
    act.sa_flags &= ~SA_RESTART;
  else
    act.sa_flags |= SA_RESTART;
  return do_sigaction(sig, &act, nullptr);
}

SPROFIL_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) __THROWNL {
  return program_mask(how, set, old);
}

SPROFIL_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) __THROW {
  return masked(real_fn(g_sigprocmask, "sigprocmask"), how, set, old);
}

// The BSD and System V mask calls, which glibc makes with its internal sigprocmask (not
// through the PLT), so each needs its own interposer, as signal() does: the same mask change
// through masked(). Debian's /bin/sh (dash) blocks every signal with sigprocmask around a
// vfork and clears the mask with sigsetmask in the child before its exec: without these, the
// agent took the signal for still blocked by the program, blocked it for the exec (exec.cpp),
// and every command of `sh -c 'a; b'` ran with sprofil's signal blocked: no sample under the
// signal clocks (the sampler fallback too).
namespace {

// A BSD mask (signals 1 to 32, bit s-1) as a set, and back.
sigset_t bsd_set(int mask) {
  sigset_t set;
  sigemptyset(&set);
  for (int s = 1; s <= 32; ++s)
    if ((static_cast<unsigned>(mask) >> (s - 1)) & 1u) sigaddset(&set, s);
  return set;
}
int bsd_mask(const sigset_t& set) {
  unsigned mask = 0;
  for (int s = 1; s <= 32; ++s)
    if (sigismember(&set, s) == 1) mask |= 1u << (s - 1);
  return static_cast<int>(mask);
}
int bsd_change(int how, int mask) {
  const sigset_t set = bsd_set(mask);
  sigset_t old;
  if (program_mask(how, &set, &old) != 0) return -1;
  return bsd_mask(old);
}
int one_change(int how, int sig) {
  sigset_t one;
  sigemptyset(&one);
  if (sigaddset(&one, sig) != 0) return -1;  // EINVAL, as glibc's
  return program_mask(how, &one, nullptr);
}

}  // namespace

SPROFIL_EXPORT int sigsetmask(int mask) __THROW {
  return bsd_change(SIG_SETMASK, mask);
}

SPROFIL_EXPORT int sigblock(int mask) __THROW {
  return bsd_change(SIG_BLOCK, mask);
}

SPROFIL_EXPORT int siggetmask(void) __THROW {
  sigset_t old;
  if (program_mask(SIG_BLOCK, nullptr, &old) != 0) return -1;
  return bsd_mask(old);
}

SPROFIL_EXPORT int sighold(int sig) __THROW {
  return one_change(SIG_BLOCK, sig);
}

SPROFIL_EXPORT int sigrelse(int sig) __THROW {
  return one_change(SIG_UNBLOCK, sig);
}

SPROFIL_EXPORT int sigignore(int sig) __THROW {
  using sigignore_fn = int (*)(int);
  static std::atomic<sigignore_fn> real{nullptr};
  if (sig <= 0 || sig != current_signal()) return real_fn(real, "sigignore")(sig);
  return set_handler(sig, SIG_IGN, 0, false) == SIG_ERR ? -1 : 0;
}

// sigpause, System V's (glibc's __xpg_sigpause: the calling thread's mask less `sig`) and
// BSD's (__sigpause with a mask; the `sigpause` symbol), wait with glibc's internal
// sigsuspend: sprofil's signal, unblocked for real, ended the wait at every sample of the wall
// clock (151 returns instead of 1 for a wait of 150 ms: tests/harm
// Signals.SigpauseWaitsAsNatively). They wait through the interposed sigsuspend, with the
// program's view of its mask.
SPROFIL_EXPORT int __sigpause(int sig_or_mask, int is_sig) {
  sigset_t mask;
  if (is_sig) {
    if (program_mask(SIG_BLOCK, nullptr, &mask) != 0 || sigdelset(&mask, sig_or_mask) != 0)
      return -1;
  } else {
    mask = bsd_set(sig_or_mask);
  }
  return sigsuspend(&mask);
}

SPROFIL_EXPORT int __xpg_sigpause(int sig) {
  return __sigpause(sig, 1);
}

// The `sigpause` symbol (BSD's), under another name here: signal.h makes `sigpause` an alias of
// __xpg_sigpause.
extern "C" int bsd_sigpause(int mask) __asm__("sigpause");
SPROFIL_EXPORT int bsd_sigpause(int mask) {
  return __sigpause(mask, 0);
}

SPROFIL_EXPORT int sigsuspend(const sigset_t* mask) {
  const auto real = real_fn(g_sigsuspend, "sigsuspend");
  const int s = current_signal();
  if (s <= 0 || sigismember(mask, s) == 1) return real(mask);
  sigset_t copy = *mask;
  sigaddset(&copy, s);  // a sample must not end the program's wait
  return real(&copy);
}

SPROFIL_EXPORT int sigwait(const sigset_t* set, int* sig) {
  sigset_t copy;
  return real_fn(g_sigwait, "sigwait")(without(set, current_signal(), &copy), sig);
}

SPROFIL_EXPORT int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  Quiet q;  // a handled signal ends the wait (EINTR): a sample must not
  sigset_t copy;
  return real_fn(g_sigwaitinfo, "sigwaitinfo")(without(set, current_signal(), &copy), info);
}

SPROFIL_EXPORT int sigtimedwait(const sigset_t* set, siginfo_t* info, const timespec* timeout) {
  Quiet q;
  sigset_t copy;
  return real_fn(g_sigtimedwait, "sigtimedwait")(without(set, current_signal(), &copy), info,
                                                 timeout);
}

SPROFIL_EXPORT int signalfd(int fd, const sigset_t* mask, int flags) __THROW {
  sigset_t copy;
  return real_fn(g_signalfd, "signalfd")(fd, without(mask, current_signal(), &copy), flags);
}

SPROFIL_EXPORT int setitimer(__itimer_which_t which, const itimerval* v, itimerval* old) __THROW {
  int rc = 0;
  if (which == ITIMER_PROF && program_setitimer(v, old, &rc)) return rc;
  return real_fn(g_setitimer, "setitimer")(which, v, old);
}

SPROFIL_EXPORT int getitimer(__itimer_which_t which, itimerval* v) __THROW {
  if (which == ITIMER_PROF && v && program_getitimer(v)) return 0;
  return real_fn(g_getitimer, "getitimer")(which, v);
}

SPROFIL_EXPORT int timer_create(clockid_t clock, sigevent* sev, timer_t* id) __THROW {
  if (sev && (sev->sigev_notify == SIGEV_SIGNAL || sev->sigev_notify == SIGEV_THREAD_ID))
    program_timer_signal(sev->sigev_signo);
  return real_timer_create(clock, sev, id);
}

SPROFIL_EXPORT int pthread_join(pthread_t t, void** ret) {
  const int rc = real_fn(g_join, "pthread_join")(t, ret);
  if (rc == 0) reap_threads();
  return rc;
}
