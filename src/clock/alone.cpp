// Calls around which the runtime's own threads end: ring mode's drainer, the live service's
// I/O thread (drain mode, sprofil record's default, and the signal clocks have none; the
// sampler clock had one until its parked threads were woken by timers of their own). A
// program that is single-threaded natively is not under sprofil then, and two kinds of calls
// depend on it:
// - The kernel refuses some (EINVAL) to a process of more than one thread: unshare of a user
//   namespace (CLONE_NEWUSER, which implies CLONE_THREAD and CLONE_FS; and CLONE_THREAD,
//   CLONE_SIGHAND, CLONE_VM), setns into a user namespace, and setns into a mount namespace
//   while another thread shares the filesystem information. unshare(1), nsenter(1),
//   bubblewrap and rootless container runtimes make them: `unshare -U` under `sprofil record
//   --clock sampler` (auto's choice where perf events are denied) said "unshare failed:
//   Invalid argument".
// - Credentials are each thread's own. capset and prctl's capability changes apply to the
//   calling thread alone, and glibc's set*id family and setgroups apply the change to every
//   thread (a signal to each) and abort the process if one thread's result differs. setpriv
//   --reuid (KEEPCAPS, setresuid, capset, setresgid) was killed by SIGABRT: the sampler clock's
//   thread (it had one then) had lost the capabilities that capset gave back to the main thread
//   only. And a thread of ours that kept privileges a program dropped with capset would be one it
//   does not know of.
// So around such a call those threads end, and start again after it, from the calling thread,
// whose credentials the new ones copy (tests/harm `NoHarm.NamespaceCallsOfASingleThreaded
// ProgramAsNatively`, `NoHarm.PrivilegeDropOfASingleThreadedProgramAsNatively`). Raw system
// calls (Go's syscall package) are not seen; libc's prctl and syscall() are (sandbox.cpp's
// interposers call needs_one_thread and call_alone).
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <type_traits>
#include <utility>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"
#include "clock/runtime.hpp"
#include "util/export.hpp"

namespace sprofil::rt {
namespace {

// A thread's join returns when the kernel clears its tid, a moment before the thread leaves
// its thread group: the runtime's threads are awaited until they have left it
// (util/thread_gone.hpp, from stop_runtime_thread and live::pause). Where that could not be
// seen (no /proc), an unshare or setns that fails with EINVAL is tried again, at most this many
// times, 100 us apart (a program with threads of its own gets its EINVAL 5 ms later than
// natively). glibc's set*id broadcast counts the threads it knows, which a join has removed.
constexpr int kRetries = 50;

bool namespace_call(long nr) {
  return nr == SYS_unshare || nr == SYS_setns;
}

}  // namespace

bool needs_one_thread(long nr, const long* a) {
  switch (nr) {
    case SYS_unshare:
      return (a[0] & (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM)) != 0;
    case SYS_setns:
      return a[1] == 0 || (a[1] & (CLONE_NEWUSER | CLONE_NEWNS)) != 0;
    case SYS_capset:
    case SYS_setuid:
    case SYS_setgid:
    case SYS_setreuid:
    case SYS_setregid:
    case SYS_setresuid:
    case SYS_setresgid:
    case SYS_setgroups:
      return true;
    case SYS_prctl:
      return a[0] == PR_SET_KEEPCAPS || a[0] == PR_SET_SECUREBITS || a[0] == PR_CAPBSET_DROP ||
             (a[0] == PR_CAP_AMBIENT && a[1] != PR_CAP_AMBIENT_IS_SET);
    default:
      return false;
  }
}

long call_alone(long nr, long (*call)(const long* a), const long* a) {
  // Under a seccomp filter the runtime makes no call of its own; a vfork child shares our
  // threads' state but not the threads.
  if (sandboxed() || getpid() != g_pid) return call(a);
  bool clock_stopped = false;
  ClockRequest clock{};
  {
    Lock lock;
    if (g_active && runtime_threads() > 0) {
      clock = g_clock;
      stop_clock();
      clock_stopped = true;
    }
  }
  ProcessHooks hooks[kMaxProcessHooks];
  process_hooks(hooks);
  bool paused[kMaxProcessHooks] = {};
  bool any = clock_stopped;
  for (int i = 0; i < kMaxProcessHooks; ++i)
    if (hooks[i].pause) any |= paused[i] = hooks[i].pause();
  long rc = call(a);
  int e = errno;
  for (int i = 0; any && namespace_call(nr) && rc < 0 && e == EINVAL && i < kRetries; ++i) {
    const timespec tick{0, 100 * 1000};
    nanosleep(&tick, nullptr);
    rc = call(a);
    e = errno;
  }
  for (int i = kMaxProcessHooks - 1; i >= 0; --i)
    if (paused[i] && hooks[i].resume) hooks[i].resume();
  if (clock_stopped) {
    Lock lock;
    if (!g_active) {
      if (const int se = start_clock(clock))
        note(
            "sprofil: sampling stopped: the clock did not start again after the program "
            "changed its namespace or credentials (%s)\n",
            strerror(se));
    }
  }
  errno = e;
  return rc;
}

}  // namespace sprofil::rt

// The libc functions: each resolves the next definition once and runs a call that needs it
// through call_alone (the arguments as longs, back to their types for the real call).
namespace {

template <class T>
long to_long(T v) {
  if constexpr (std::is_pointer_v<T>)
    return reinterpret_cast<long>(v);
  else
    return static_cast<long>(v);
}

template <class T>
T from_long(long v) {
  if constexpr (std::is_pointer_v<T>)
    return reinterpret_cast<T>(v);
  else
    return static_cast<T>(v);
}

template <class... T, size_t... I>
long invoke(int (*f)(T...), const long* v, std::index_sequence<I...>) {
  return f(from_long<T>(v[I])...);
}

template <auto& Cache, class... T>
int alone(const char* name, long nr, T... x) {
  const auto real = sprofil::rt::real_fn(Cache, name);
  if (!real) return errno = ENOSYS, -1;
  const long a[6] = {to_long(x)...};
  if (!sprofil::rt::needs_one_thread(nr, a)) return real(x...);
  return static_cast<int>(sprofil::rt::call_alone(
      nr,
      [](const long* v) -> long {
        return invoke(Cache.load(), v, std::index_sequence_for<T...>{});
      },
      a));
}

std::atomic<int (*)(int)> g_unshare{nullptr};
std::atomic<int (*)(int, int)> g_setns{nullptr};
std::atomic<int (*)(uid_t)> g_setuid{nullptr}, g_seteuid{nullptr};
std::atomic<int (*)(gid_t)> g_setgid{nullptr}, g_setegid{nullptr};
std::atomic<int (*)(uid_t, uid_t)> g_setreuid{nullptr};
std::atomic<int (*)(gid_t, gid_t)> g_setregid{nullptr};
std::atomic<int (*)(uid_t, uid_t, uid_t)> g_setresuid{nullptr};
std::atomic<int (*)(gid_t, gid_t, gid_t)> g_setresgid{nullptr};
std::atomic<int (*)(size_t, const gid_t*)> g_setgroups{nullptr};
std::atomic<int (*)(cap_user_header_t, const cap_user_data_t)> g_capset{nullptr};

}  // namespace

SPROFIL_EXPORT int unshare(int flags) __THROW {
  return alone<g_unshare>("unshare", SYS_unshare, flags);
}
SPROFIL_EXPORT int setns(int fd, int nstype) __THROW {
  return alone<g_setns>("setns", SYS_setns, fd, nstype);
}
SPROFIL_EXPORT int setuid(uid_t u) __THROW {
  return alone<g_setuid>("setuid", SYS_setuid, u);
}
SPROFIL_EXPORT int setgid(gid_t g) __THROW {
  return alone<g_setgid>("setgid", SYS_setgid, g);
}
// glibc makes these two with setresuid and setresgid (and applies them to every thread).
SPROFIL_EXPORT int seteuid(uid_t u) __THROW {
  return alone<g_seteuid>("seteuid", SYS_setresuid, u);
}
SPROFIL_EXPORT int setegid(gid_t g) __THROW {
  return alone<g_setegid>("setegid", SYS_setresgid, g);
}
SPROFIL_EXPORT int setreuid(uid_t r, uid_t e) __THROW {
  return alone<g_setreuid>("setreuid", SYS_setreuid, r, e);
}
SPROFIL_EXPORT int setregid(gid_t r, gid_t e) __THROW {
  return alone<g_setregid>("setregid", SYS_setregid, r, e);
}
SPROFIL_EXPORT int setresuid(uid_t r, uid_t e, uid_t s) __THROW {
  return alone<g_setresuid>("setresuid", SYS_setresuid, r, e, s);
}
SPROFIL_EXPORT int setresgid(gid_t r, gid_t e, gid_t s) __THROW {
  return alone<g_setresgid>("setresgid", SYS_setresgid, r, e, s);
}
SPROFIL_EXPORT int setgroups(size_t n, const gid_t* groups) __THROW {
  return alone<g_setgroups>("setgroups", SYS_setgroups, n, groups);
}
// Declared by libcap's <sys/capability.h>, defined by glibc.
extern "C" SPROFIL_EXPORT int capset(cap_user_header_t header, const cap_user_data_t data) {
  return alone<g_capset>("capset", SYS_capset, header, data);
}
