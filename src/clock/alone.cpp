// Interposed unshare and setns. The kernel refuses some of them (EINVAL) to a process of more
// than one thread: unshare of a user namespace (CLONE_NEWUSER, which implies CLONE_THREAD and
// CLONE_FS; and CLONE_THREAD, CLONE_SIGHAND, CLONE_VM), setns into a user namespace, and setns
// into a mount namespace while another thread shares the filesystem information (threads
// do). A single-threaded program makes them natively: unshare(1), bubblewrap, a rootless
// container runtime's set-up. Under sprofil the runtime's own threads (the sampler clock's
// sampler, ring mode's drainer, the live service's I/O thread) made them fail: `unshare -U`
// under `sprofil record --clock sampler` (what `auto` picks where perf events are denied) said
// "unshare failed: Invalid argument". So around such a call those threads end and start again
// after it (tests/harm `NoHarm.UserNamespaceUnshareAsNatively`). Raw system calls (Go's
// syscall.Unshare) are not seen; libc's syscall() is (sandbox.cpp's interposer).
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"
#include "clock/runtime.hpp"
#include "util/export.hpp"

namespace sprofil::rt {
namespace {

struct AloneHooks {
  bool (*pause)();
  void (*resume)();
};
AloneHooks g_alone_hooks[4] = {};  // add_alone_hooks (g_mu)

// A thread's join returns when the kernel clears its tid, a moment before the thread leaves
// its thread group: the call is tried again while it fails so, at most this many times, 100
// us apart (a program of its own threads gets its EINVAL 5 ms later than natively).
constexpr int kRetries = 50;

}  // namespace

void add_alone_hooks(bool (*pause)(), void (*resume)()) {
  Lock lock;
  for (auto& h : g_alone_hooks) {
    if (h.pause == pause && h.resume == resume) return;
    if (!h.pause) {
      h = {pause, resume};
      return;
    }
  }
}

bool needs_one_thread(long nr, long a1, long a2) {
  if (nr == SYS_unshare)
    return (a1 & (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM)) != 0;
  if (nr == SYS_setns) return a2 == 0 || (a2 & (CLONE_NEWUSER | CLONE_NEWNS)) != 0;
  return false;
}

long call_alone(long (*call)(long, long), long a1, long a2) {
  // Under a seccomp filter the runtime makes no call of its own; a vfork child shares our
  // threads' state but not the threads.
  if (sandboxed() || getpid() != g_pid) return call(a1, a2);
  bool clock_stopped = false;
  ClockRequest clock{};
  AloneHooks hooks[4];
  {
    Lock lock;
    if (g_active && runtime_threads() > 0) {
      clock = g_clock;
      stop_clock();
      clock_stopped = true;
    }
    memcpy(hooks, g_alone_hooks, sizeof hooks);
  }
  bool paused[4] = {};
  bool any = clock_stopped;
  for (int i = 0; i < 4; ++i)
    if (hooks[i].pause) any |= paused[i] = hooks[i].pause();
  long rc = call(a1, a2);
  int e = errno;
  for (int i = 0; any && rc < 0 && e == EINVAL && i < kRetries; ++i) {
    const timespec tick{0, 100 * 1000};
    nanosleep(&tick, nullptr);
    rc = call(a1, a2);
    e = errno;
  }
  for (int i = 3; i >= 0; --i)
    if (paused[i]) hooks[i].resume();
  if (clock_stopped) {
    Lock lock;
    if (!g_active) (void)start_clock(clock);
  }
  errno = e;
  return rc;
}

}  // namespace sprofil::rt

namespace {
using unshare_fn = int (*)(int);
using setns_fn = int (*)(int, int);
std::atomic<unshare_fn> g_unshare{nullptr};
std::atomic<setns_fn> g_setns{nullptr};
}  // namespace

SPROFIL_EXPORT int unshare(int flags) __THROW {
  const auto real = sprofil::rt::real_fn(g_unshare, "unshare");
  if (!real) return errno = ENOSYS, -1;
  if (!sprofil::rt::needs_one_thread(SYS_unshare, flags, 0)) return real(flags);
  return static_cast<int>(sprofil::rt::call_alone(
      [](long a1, long) -> long { return g_unshare.load()(static_cast<int>(a1)); }, flags, 0));
}

SPROFIL_EXPORT int setns(int fd, int nstype) __THROW {
  const auto real = sprofil::rt::real_fn(g_setns, "setns");
  if (!real) return errno = ENOSYS, -1;
  if (!sprofil::rt::needs_one_thread(SYS_setns, fd, nstype)) return real(fd, nstype);
  return static_cast<int>(sprofil::rt::call_alone(
      [](long a1, long a2) -> long {
        return g_setns.load()(static_cast<int>(a1), static_cast<int>(a2));
      },
      fd, nstype));
}
