// The clock across fork: the runtime mutex is taken around the fork (util::ForkSafeMutex) with
// every signal blocked in the forking thread; in the child, where only that thread exists and
// no POSIX timer or ITIMER_PROF was inherited, the registry is forgotten and the running clock
// armed anew for the one thread (the agent's hook first: the child's own file).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "clock/clock.hpp"
#include "util/mutex.hpp"

namespace sprofil::rt {
namespace {

__attribute__((tls_model("initial-exec"))) thread_local sigset_t t_fork_mask;

// Under the program's seccomp filter only the mutex (sandbox.cpp): the forked child is not
// sampled, and no system call of sprofil's is made.
void atfork_prepare() {
  if (sandboxed()) return util::ForkSafeMutex<&g_mu>::prepare();
  sigset_t all;
  sigfillset(&all);
  real_sigmask(SIG_BLOCK, &all, &t_fork_mask);
  util::ForkSafeMutex<&g_mu>::prepare();
}
void atfork_parent() {
  util::ForkSafeMutex<&g_mu>::parent();
  if (sandboxed()) return;
  real_sigmask(SIG_SETMASK, &t_fork_mask, nullptr);
}
// Only the forking thread exists in the child.
void atfork_child() {
  util::ForkSafeMutex<&g_mu>::child();
  if (sandboxed()) return;
  g_pid = getpid();
  reseed_after_fork();
  forget_slots_after_fork();
  timers_split_after_fork(ClockRequest{});  // our TLS holds the parent's thread's stime
  if (g_active) {
    if (g_hooks.after_fork_child) g_hooks.after_fork_child();
    const ClockOps& ops = clock_ops(g_clock.kind);
    if (ops.after_fork_child) ops.after_fork_child(g_clock);
    add_slot(gettid_());
    arm_all();
  }
  real_sigmask(SIG_SETMASK, &t_fork_mask, nullptr);
}

}  // namespace

void install_fork_handlers() {
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

}  // namespace sprofil::rt
