// The program's view of its signals and interval timers: what the interposed sigaction,
// signal, timer_create and setitimer/getitimer (interpose_signals.cpp) ask of the runtime.
// The program reads back only what it set on sprofil's signal; a handler, SIG_IGN or a timer
// of its own on that signal moves sprofil to another one, and its own ITIMER_PROF moves the
// itimer clock to the cpu clock.
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"

namespace sprofil::rt {

namespace {
// The program claims sig: sprofil stops its clock (pending samples discarded), the program's
// disposition `act` is set for real, and the clock starts again on another signal. With g_mu.
void move_off(int sig, const struct sigaction* act) {
  ClockRequest c = g_clock;
  if (sig <= 64) g_claimed |= uint64_t{1} << (sig - 1);
  stop_clock();  // discards our pending signals, restores the program's view
  real_sigaction(sig, act, nullptr);
  if (c.kind == ClockKind::kItimer) {
    g_itimer_taken = true;
    c.kind = ClockKind::kCpu;
    note(
        "sprofil: the program took SIGPROF; sampling continues with the cpu clock "
        "(CPU-time timers) on another signal\n");
  }
  if (int e = start_clock(c))
    note(
        "sprofil: sampling stopped: the program took signal %d and sprofil found no other "
        "(%s)\n",
        sig, strerror(e));
}
}  // namespace

bool program_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig <= 0 || sig != current_signal()) return false;
  if (getpid() != g_pid) {
    // A vfork child shares our memory but has no timer: it may set what it likes (its exec
    // resets handlers anyway) but must not touch the parent's state.
    const struct sigaction view = g_prev_action;
    if (act && real_sigaction(sig, act, nullptr) != 0) return false;
    if (old) *old = view;
    return true;
  }
  Lock lock;
  if (!g_active || sig != g_signo) return false;
  const struct sigaction view = g_prev_action;
  if (act && act->sa_handler == SIG_DFL) {
    g_prev_action = *act;  // recorded; sprofil keeps the signal (the default would kill)
  } else if (act) {
    move_off(sig, act);  // the program claims the signal and gets what it asked
  }
  if (old) *old = view;
  return true;
}

void program_timer_signal(int sig) {
  if (sig <= 0 || sig != current_signal() || getpid() != g_pid) return;
  Lock lock;
  if (!g_active || sig != g_signo) return;
  // The program's own timer on our signal: it is the program's now, with the disposition it
  // has set (SIG_DFL kills at the first expiry, as it would without sprofil).
  const struct sigaction view = g_prev_action;
  move_off(sig, &view);
}

bool program_setitimer(const itimerval* v, itimerval* old, int* rc) {
  if (sandboxed() || getpid() != g_pid) return false;  // a vfork child: its own itimer
  Lock lock;
  if (!g_active || g_clock.kind != ClockKind::kItimer) return false;
  if (old) *old = itimerval{};  // the program has none: setting one moves sprofil away
  *rc = 0;
  if (v && (v->it_value.tv_sec || v->it_value.tv_usec)) {
    g_itimer_taken = true;
    ClockRequest c = g_clock;
    c.kind = ClockKind::kCpu;
    stop_clock();
    if (int e = start_clock(c))
      note("sprofil: sampling stopped: the program set ITIMER_PROF (%s)\n", strerror(e));
    else
      note(
          "sprofil: the program set ITIMER_PROF; sampling continues with the cpu clock "
          "(CPU-time timers)\n");
    *rc = real_setitimer(ITIMER_PROF, v, nullptr);
  }
  return true;
}

bool program_getitimer(itimerval* v) {
  Lock lock;
  if (!g_active || g_clock.kind != ClockKind::kItimer) return false;
  *v = itimerval{};
  return true;
}

}  // namespace sprofil::rt
