// The ends of a process image that the agent completes its file at: exit (atexit) and
// quick_exit (at_quick_exit) stop sampling and complete the file (finish.cpp); _exit and
// _Exit, which run no handler, are interposed and write the end fields only.
//
// Why _exit: many programs end with it, not with exit: Debian's /bin/sh (dash) after every
// script, forked workers, daemons. Without the end fields the report says the profile did not
// finish cleanly (a crash, a kill) and has no effective rate. What _exit writes is the header's
// end fields and FINISHED flag, from getrusage and the clock, nothing more, because _exit may
// be called where the agent may do nothing else:
// - in a signal handler (a SIGTERM handler that ends with _exit), which may have interrupted
//   malloc, a lock of libc's, or the agent itself: no allocation, no lock waited for (the
//   agent's mutex is tried: held, by this thread or another, the file is left as it is: an
//   unfinished file with every sample), no exchange with the record parent;
// - in a vfork child, which shares the parent's memory: it is not the process the header
//   names (its pid is not the header's), and it touches nothing;
// - where a signal per sample runs the perf clock, the calling thread's kernel time since its
//   last signal is credited first (rt::credit_at_underscore_exit), as a clean exit's stop of
//   the clock does; the runtime's mutex is only tried;
// - with sampling still running: samples after the end fields still count (in drain mode the
//   record parent, which sees the process end, recomputes the effective rate from all of
//   them, drain_ends.cpp gone()). Records kept in memory (a full disk) are not written, the
//   reserved space is given back only by the record parent, and an empty forked child's file
//   is kept: each would need sampling stopped first, which frees memory.
// Then it ends the process with the _exit the program would have called without the agent
// (the next definition, looked up at the agent's start; the system call where none was).
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include "agent/state.hpp"
#include "util/export.hpp"

namespace sprofil::agent {
namespace {

using ExitFn = void (*)(int);
std::atomic<ExitFn> g_next_exit{nullptr}, g_next_Exit{nullptr};

void agent_exit() {
  Lock lock;
  if (!g_on) return;
  rt::perf::release_at_flush();  // drain mode: the parent gives the unused space back
  stop_sampling();
  complete_file(true);
  g_on = false;
}

// The program installs a seccomp filter (rt's interposer, before the filter, without the
// runtime's mutex): the file says so; with a signal per sample (whose handler makes system
// calls) sampling stops and the file is completed as at an exit; in drain mode the record
// parent's events go on and the parent completes the file at the end. Then the agent makes no
// system call of its own: every hook of it returns at once (g_on).
void agent_sandboxed() {
  Lock lock;
  if (!g_on) return;
  // A pending forked child maps the file of the process it was forked from: not its own.
  if (!g_pending.load(std::memory_order_acquire))
    std::atomic_ref<uint32_t>(g_hdr->flags).fetch_or(SPROF_F_SANDBOXED);
  if (!rt::perf::drain_mode()) {
    stop_sampling();
    complete_file(true);
  }
  g_on = false;
}

// Signal-safe (see the top of this file).
void finish_at_underscore_exit() {
  if (!g_on.load(std::memory_order_acquire) || g_pending.load(std::memory_order_acquire)) return;
  // A vfork child (or a raw clone sharing our memory) is not the process the header names:
  // it leaves everything, the mutex included, as it is.
  sprof_header* const h = g_hdr;
  if (!h || std::atomic_ref<int32_t>(h->pid).load() != getpid()) return;
  rt::credit_at_underscore_exit();  // first: its credit is in the tallies the end fields use
  if (pthread_mutex_trylock(&g_mu) != 0) return;
  if (g_on) finish_header();
  pthread_mutex_unlock(&g_mu);
}

[[noreturn]] void end_process(std::atomic<ExitFn>* next, int status) {
  if (const ExitFn f = next->load(std::memory_order_acquire)) f(status);
  syscall(SYS_exit_group, status);  // what glibc's _exit does
  for (;;) syscall(SYS_exit, status);
}

}  // namespace

void install_exit_hooks() {
  g_next_exit.store(reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "_exit")), std::memory_order_release);
  g_next_Exit.store(reinterpret_cast<ExitFn>(dlsym(RTLD_NEXT, "_Exit")), std::memory_order_release);
  atexit(agent_exit);
  at_quick_exit(agent_exit);
  rt::add_process_hooks({.sandboxed = agent_sandboxed});
}

}  // namespace sprofil::agent

SPROFIL_EXPORT void _exit(int status) {
  sprofil::agent::finish_at_underscore_exit();
  sprofil::agent::end_process(&sprofil::agent::g_next_exit, status);
}

SPROFIL_EXPORT void _Exit(int status) {
  sprofil::agent::finish_at_underscore_exit();
  sprofil::agent::end_process(&sprofil::agent::g_next_Exit, status);
}
