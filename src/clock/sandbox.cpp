// A program that installs a seccomp filter. From then on the kernel applies the program's
// policy to every system call of the thread that installed it (and of the threads and
// processes it creates later, and of every thread with SECCOMP_FILTER_FLAG_TSYNC), and a
// call that the policy does not allow may kill the process (SECCOMP_RET_KILL_PROCESS, the
// default of libseccomp's and systemd's filters). The policy allows what the program makes;
// the agent's own calls (a new thread's perf_event_open and socket exchange, getrusage in a
// signal handler, pwrite of a dlopen'd object's record, getppid in a forked child) are not
// the program's and may be denied: natively the program runs, under sprofil it would be
// killed. So the filter's installation, through libc's prctl(PR_SET_SECCOMP) or
// syscall(SYS_seccomp or SYS_prctl) (libseccomp's seccomp_load), is interposed, and before
// the real call the runtime and the agent stop making system calls of their own:
// - in drain mode (sprofil record's default) the events the record parent holds keep
//   sampling the threads that have them (the kernel writes the records; the program makes no
//   call): the agent goes quiet, the threads and processes started later are not sampled,
//   and the parent completes the file when the process ends;
// - otherwise (a signal per sample, whose handler makes system calls) sampling stops there,
//   and the file is completed as at an exit;
// - the header says so (SPROF_F_SANDBOXED);
// - sprofil's variables (SPROFIL_*) and libsprofil in LD_PRELOAD are removed from the
//   environment, and from the environment an exec or posix_spawn passes (exec.cpp): a program
//   it starts inherits the filter, and the agent's start in it would make calls the filter
//   denies (its first exchange with the record parent).
// A filter installed without libc (a raw system call instruction, as Chromium's sandbox
// does) is not seen (docs/agent.md, "Seccomp filters").
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"
#include "util/export.hpp"

namespace sprofil::rt {
namespace {

std::atomic<bool> g_sandboxed{false};
// A vfork child (it shares our memory) that installs a filter: its pid, so that its exec
// drops the agent from the environment it passes without changing ours.
std::atomic<pid_t> g_vfork_sandboxed{0};

using syscall_fn = long (*)(long, ...);
using prctl_fn = int (*)(int, ...);
std::atomic<syscall_fn> g_syscall{nullptr};
std::atomic<prctl_fn> g_prctl{nullptr};

// Resolved at load: the agent's own syscall() calls come through the interposer below, some
// of them in a signal handler, where dlsym may not run.
__attribute__((constructor(101))) void resolve_syscall() {
  (void)real_fn(g_syscall, "syscall");
}

// The variables that hold sprofil's state removed from our own environment (the program's
// environ: execv, execvp, posix_spawn with environ, system and popen pass it).
void scrub_environ() {
  for (bool again = true; again;) {
    again = false;
    for (char** e = environ; e && *e; ++e) {
      if (!is_sprofil_var(*e)) continue;
      const char* eq = strchr(*e, '=');
      char name[256];
      const size_t n = eq ? static_cast<size_t>(eq - *e) : strlen(*e);
      if (n >= sizeof name) continue;
      memcpy(name, *e, n);
      name[n] = '\0';
      unsetenv(name);
      again = true;
      break;
    }
  }
  const char* cur = getenv("LD_PRELOAD");
  if (!cur) return;
  const size_t len = strlen(cur);
  char* kept = static_cast<char*>(malloc(len + 1));
  if (!kept) return;
  strip_preload(cur, kept);
  if (*kept)
    setenv("LD_PRELOAD", kept, 1);
  else
    unsetenv("LD_PRELOAD");
  free(kept);
}

}  // namespace

bool sandboxed() {
  return g_sandboxed.load(std::memory_order_acquire);
}

bool vfork_child_sandboxed() {
  const pid_t vfork_child = g_vfork_sandboxed.load(std::memory_order_relaxed);
  return vfork_child != 0 && vfork_child == getpid();
}

void enter_sandbox() {
  if (sandboxed()) return;
  // A vfork child shares our memory, state and environment: it changes none of them.
  if (getpid() != g_pid) {
    g_vfork_sandboxed.store(getpid(), std::memory_order_relaxed);
    return;
  }
  ProcessHooks hooks[kMaxProcessHooks];
  process_hooks(hooks);
  for (const auto& h : hooks)  // the agent (its file, before the clock stops), the live service
    if (h.sandboxed) h.sandboxed();
  {
    Lock lock;
    // A signal per sample (the faces' and the API's clocks too): the handler makes system
    // calls, so sampling stops. Drain mode takes no signal: its events go on.
    if (g_active && g_signo) stop_clock();
    g_sandboxed.store(true, std::memory_order_release);
  }
  scrub_environ();
}

}  // namespace sprofil::rt

using sprofil::rt::real_fn;

SPROFIL_EXPORT int prctl(int option, ...) __THROW {
  va_list ap;
  va_start(ap, option);
  const unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
                      a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
  va_end(ap);
  if (option == PR_SET_SECCOMP) sprofil::rt::enter_sandbox();
  const auto real = real_fn(sprofil::rt::g_prctl, "prctl");
  if (!real) return errno = ENOSYS, -1;
  // A change of the calling thread's capabilities (alone.cpp).
  const long a[6] = {option, static_cast<long>(a2), static_cast<long>(a3), static_cast<long>(a4),
                     static_cast<long>(a5)};
  if (sprofil::rt::needs_one_thread(SYS_prctl, a))
    return static_cast<int>(sprofil::rt::call_alone(
        SYS_prctl,
        [](const long* v) -> long {
          return sprofil::rt::g_prctl.load()(static_cast<int>(v[0]), v[1], v[2], v[3], v[4]);
        },
        a));
  return real(option, a2, a3, a4, a5);
}

SPROFIL_EXPORT long syscall(long nr, ...) __THROW {
  va_list ap;
  va_start(ap, nr);
  const long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long),
             a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  if ((nr == SYS_seccomp && (a1 == SECCOMP_SET_MODE_FILTER || a1 == SECCOMP_SET_MODE_STRICT)) ||
      (nr == SYS_prctl && a1 == PR_SET_SECCOMP))
    sprofil::rt::enter_sandbox();
  const auto real = real_fn(sprofil::rt::g_syscall, "syscall");
  if (!real) return errno = ENOSYS, -1;
  // unshare, setns and credential changes (alone.cpp): the system call's number in a[6].
  const long a[7] = {a1, a2, a3, a4, a5, a6, nr};
  if (sprofil::rt::needs_one_thread(nr, a))
    return sprofil::rt::call_alone(
        nr,
        [](const long* v) -> long {
          return sprofil::rt::g_syscall.load()(v[6], v[0], v[1], v[2], v[3], v[4], v[5]);
        },
        a);
  return real(nr, a1, a2, a3, a4, a5, a6);
}
