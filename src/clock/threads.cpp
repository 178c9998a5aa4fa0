// The thread registry: the threads the runtime samples (a slot each, with what was armed for
// it), found in /proc/self/task when a clock starts and registered by the interposed
// pthread_create when they start; forgotten when they exit (a key destructor) or vanish
// (reap). With the runtime mutex unless said otherwise.
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"
#include "clock/perf.hpp"
#include "util/export.hpp"
#include "util/grow.hpp"
#include "util/thread_gone.hpp"

namespace sprofil::rt {

Slot* g_slots = nullptr;
int g_nslots = 0;

namespace {
int g_capslots = 0;
pthread_key_t g_exit_key;
bool g_exit_key_ok = false;

void thread_exiting(void*) {
  if (sandboxed()) return;
  Lock lock;
  if (Slot* s = find_slot(gettid_())) {
    disarm_thread(s);
    remove_slot(s);
  }
}
}  // namespace

Slot* find_slot(pid_t tid) {
  for (int i = 0; i < g_nslots; ++i)
    if (g_slots[i].tid == tid) return &g_slots[i];
  return nullptr;
}

Slot* add_slot(pid_t tid) {
  if (Slot* s = find_slot(tid)) return s;
  if (!util::grow(&g_slots, &g_capslots, static_cast<size_t>(g_nslots) + 1, 64)) return nullptr;
  g_slots[g_nslots] = Slot{tid, false, timer_t{}, nullptr, nullptr};
  return &g_slots[g_nslots++];
}

void remove_slot(Slot* s) {
  *s = g_slots[--g_nslots];
}

void disarm_thread(Slot* s) {
  if (const auto disarm = clock_ops(g_clock.kind).disarm_thread) disarm(s);
}

// Threads that exist but did not come through our pthread_create (they predate the library,
// or were made with clone directly) are found in /proc/self/task. The directory's link count
// is 2 plus the number of threads (the kernel's proc_task_getattr): a process of one thread,
// the caller, as at every process image's start, is known from a stat of it, without reading
// the directory (12-13 us of a fresh process's CPU against 3 us, bench/start_pieces.sh).
void scan_threads() {
  const pid_t drainer = perf::drainer_tid();
  if (struct stat st; stat("/proc/self/task", &st) == 0 && st.st_nlink == 3) {
    if (const pid_t self = gettid_(); self != drainer) add_slot(self);
    return;
  }
  DIR* d = opendir("/proc/self/task");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const auto tid = static_cast<pid_t>(atoi(e->d_name));
    if (tid != drainer) add_slot(tid);
  }
  closedir(d);
}

// Threads that ended without their key destructor (raw SYS_exit) keep a slot, and with it a
// timer or a perf event (an fd). tgkill(sig 0) tells whether a tid still lives.
void reap_locked() {
  for (int i = 0; i < g_nslots;) {
    if (syscall(SYS_tgkill, g_pid, g_slots[i].tid, 0) != 0 && errno == ESRCH) {
      disarm_thread(&g_slots[i]);
      remove_slot(&g_slots[i]);
      continue;
    }
    ++i;
  }
}

// Without the mutex: a thread made by the interposed pthread_create, before its start routine.
void thread_started() {
  if (sandboxed()) return;  // not sampled: no system call of sprofil's (sandbox.cpp)
  {
    Lock lock;
    const pid_t self = gettid_();
    // A slot with our tid belonged to a thread that vanished (the tid was reused): its timer
    // or event watches nothing that lives. Start afresh.
    if (Slot* old = find_slot(self)) {
      disarm_thread(old);
      remove_slot(old);
    }
    reap_locked();
    Slot* s = add_slot(self);
    if (s && g_active) arm_one(s);
  }
  if (g_exit_key_ok) pthread_setspecific(g_exit_key, &g_cookie);
}

bool threads_init() {
  g_exit_key_ok = pthread_key_create(&g_exit_key, thread_exiting) == 0;
  return g_exit_key_ok;
}

// In a forked child: inherited perf fds still name the parent's threads: drop our references
// only (no POSIX timer was inherited).
void forget_slots_after_fork() {
  for (int i = 0; i < g_nslots; ++i)
    if (g_slots[i].event) {
      perf::forget_event(g_slots[i].event);
      free(g_slots[i].event);
    }
  perf::reset_after_fork();
  g_nslots = 0;
}

// See check_masks().
void check_masks_locked() {
  if (!g_active || clock_ops(g_clock.kind).process_wide || g_signo <= 0 || g_signo > 64) return;
  static bool said = false;
  if (said) return;
  // The calling thread is not checked: it holds g_mu, so every signal is blocked in it (Lock).
  const pid_t self = gettid_();
  for (int i = 0; i < g_nslots; ++i) {
    if (g_slots[i].tid == self) continue;
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", static_cast<int>(g_slots[i].tid));
    FILE* f = fopen(path, "re");
    if (!f) continue;
    unsigned long long blk = 0;
    bool found = false;
    while (fgets(buf, sizeof buf, f))
      if (strncmp(buf, "SigBlk:", 7) == 0) found = sscanf(buf + 7, "%llx", &blk) == 1;
    fclose(f);
    if (found && ((blk >> (g_signo - 1)) & 1)) {
      note(
          "sprofil: thread %d blocks the profiling signal %d behind sprofil's back (a raw "
          "rt_sigprocmask): it is not sampled while it does\n",
          static_cast<int>(g_slots[i].tid), g_signo);
      said = true;
      return;
    }
  }
}

void reap_threads() {
  if (sandboxed() || getpid() != g_pid) return;  // a vfork child: the registry is its parent's
  Lock lock;
  reap_locked();
}

void check_masks() {
  if (sandboxed()) return;
  Lock lock;
  check_masks_locked();
}

namespace {
int g_runtime_threads = 0;  // running RuntimeThreads (g_mu)
// How long a joined thread may take to leave the thread group (util/thread_gone.hpp).
constexpr uint64_t kThreadGoneNs = 1000000000;
}  // namespace

int start_runtime_thread(RuntimeThread* t, void* (*fn)(void*)) {
  if (t->running) return 0;
  using create_fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static std::atomic<create_fn> create{nullptr};
  const create_fn real = real_fn(create, "pthread_create");
  if (!real) return EAGAIN;
  t->stop.store(false);
  t->tid.store(0);
  // A small stack: the default (RLIMIT_STACK, 8 MiB) was address space taken from the program,
  // which under an address-space limit (ulimit -v) it no longer had. The drainer and the live
  // service keep little on their stacks.
  pthread_attr_t attr;
  const bool small = pthread_attr_init(&attr) == 0;
  if (small) pthread_attr_setstacksize(&attr, 256 * 1024);
  const int e = real(&t->thread, small ? &attr : nullptr, fn, t);
  if (small) pthread_attr_destroy(&attr);
  if (e != 0) return e;
  t->running = true;
  ++g_runtime_threads;
  while (t->tid.load(std::memory_order_acquire) == 0) sched_yield();
  return 0;
}

int runtime_threads() {
  return g_runtime_threads;
}

void stop_runtime_thread(RuntimeThread* t) {
  if (!t->running) return;
  t->stop.store(true, std::memory_order_release);
  using join_fn = int (*)(pthread_t, void**);
  static std::atomic<join_fn> join{nullptr};
  const pid_t tid = t->tid.load(std::memory_order_acquire);
  real_fn(join, "pthread_join")(t->thread, nullptr);
  // Gone from the process too: the call that stopped it may need a process of one thread.
  util::wait_thread_gone(tid, util::clock_ns(CLOCK_MONOTONIC) + kThreadGoneNs);
  forget_runtime_thread(t);
}

void forget_runtime_thread(RuntimeThread* t) {
  if (t->running) --g_runtime_threads;
  t->running = false;
  t->tid.store(0);
}

void runtime_thread_begin(RuntimeThread* t) {
  sigset_t all;
  sigfillset(&all);
  real_sigmask(SIG_BLOCK, &all, nullptr);  // never sampled, never interrupted
  t->tid.store(gettid_(), std::memory_order_release);
}

}  // namespace sprofil::rt

// --- interposed pthread_create -------------------------------------------------------------
// Every thread created through pthread_create registers itself (and arms its own timer when a
// clock runs) before running its start routine, and unregisters at exit through a key
// destructor. This also closes the race with a clock starting while threads are created.
namespace {
struct StartArgs {
  void* (*fn)(void*);
  void* arg;
  uint64_t vblocked;  // the creator's virtual mask: the new thread inherits its mask
};

void* start_trampoline(void* p) {
  const StartArgs a = *static_cast<StartArgs*>(p);
  free(p);
  sprofil::rt::perf::set_thread_start(reinterpret_cast<uintptr_t>(a.fn));
  sprofil::rt::set_virtual_blocked(a.vblocked);
  sprofil::rt::thread_started();
  return a.fn(a.arg);
}

using pthread_create_fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
}  // namespace

SPROFIL_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*),
                                  void* arg) {
  static std::atomic<pthread_create_fn> real{nullptr};
  const pthread_create_fn f = sprofil::rt::real_fn(real, "pthread_create");
  if (!f) return EAGAIN;
  if (sprofil::rt::sandboxed()) return f(thread, attr, fn, arg);
  auto* a = static_cast<StartArgs*>(malloc(sizeof(StartArgs)));
  if (!a) return f(thread, attr, fn, arg);
  a->fn = fn;
  a->arg = arg;
  a->vblocked = sprofil::rt::virtual_blocked();
  const int rc = f(thread, attr, start_trampoline, a);
  if (rc != 0) free(a);
  return rc;
}
