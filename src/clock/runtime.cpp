// Signal-safety audit of on_signal(), the profiling signal handler:
// - It reads the siginfo and ucontext the kernel gave it and decides whether the signal is
//   ours: SI_TIMER with si_value == &g_cookie (our POSIX timers), POLL_IN/POLL_HUP from an fd
//   in perf's bitmap (perf::is_ours: atomic loads), or SI_KERNEL (ITIMER_PROF). Anything else
//   (kill(), sigqueue(), tgkill(), another timer on the same signal) is dropped uncounted.
// - The weight: si_overrun (timers), and their kernel part: getrusage(RUSAGE_THREAD) (a plain
//   system call, not on POSIX's list but a raw syscall wrapper with no library state; errno is
//   restored) against initial-exec TLS and two atomics; for perf, perf::signal_weight() (the
//   weight and its kernel part, perf::credit): read(2) of the event's
//   counter and ioctl(PERF_EVENT_IOC_PERIOD) for jitter and, at a thread's first sample, to
//   end its random first period, plain system calls with no library
//   state (read is async-signal-safe by POSIX; ioctl is a raw syscall wrapper), with per-thread
//   state in initial-exec TLS and the period and generation in atomics; for ITIMER_PROF,
//   itimer_weight(): clock_gettime(2) (async-signal-safe) and a CAS on an atomic.
// - Then engine::global().sample(), whose own audit is at the top of engine/engine.cpp
//   (atomics and immutable, safely published tables only).
// - It saves and restores errno. It takes no lock, allocates nothing, and reads no runtime
//   state guarded by g_mu: every value it reads is an atomic or was published before the
//   signal was first armed (g_cookie is a constant).
// - It runs with every signal blocked (sa_mask full): no handler of the program's can run on
//   top of it and siglongjmp out while the engine's reader count is raised.
// Everything else in this file runs outside the handler under g_mu, with every signal blocked
// in the thread that holds it (Lock): a program handler that calls an interposed function
// (sigaction, setitimer...) can never interrupt a holder of g_mu on its own thread.
#include "clock/runtime.hpp"

#include "clock/interpose.hpp"
#include "clock/perf.hpp"
#include "util/mutex.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sprofil::rt {
namespace {

// Marks the sigevent of our own timers, so that the handler can tell their signals apart.
const char g_cookie = 0;

struct Slot {
  pid_t tid;
  bool has_timer;
  timer_t timer;
  perf::Event* event;  // kPerf: heap-allocated (the ring drainer keeps pointers to it)
};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
// All of the following are guarded by g_mu.
bool g_active = false;  // a clock is running
// The kind of the clock last started, readable without the runtime mutex (last_clock_kind()).
std::atomic<uint8_t> g_clock_kind_now{0};
bool g_exec_suspended = false;  // stopped by before_exec(); restarted if exec fails
ClockRequest g_clock;
int g_signo = 0;
std::atomic<int> g_signo_now{0};  // g_signo, for the lock-free interposers
struct sigaction g_prev_action;   // the program's view of g_signo: what it set, or had
uint64_t g_claimed = 0;           // bit s-1: the program put its own handler (or SIG_IGN) on s
bool g_itimer_taken = false;      // the program uses ITIMER_PROF or SIGPROF: no itimer clock
Slot* g_slots = nullptr;
int g_nslots = 0, g_capslots = 0;
pid_t g_pid = 0;
Hooks g_hooks;
pthread_key_t g_exit_key;
bool g_exit_key_ok = false;
bool g_perf_ring = false;        // kPerf: ring buffers instead of a signal per sample
const char* g_auto_reason = "";  // why kAuto fell back to kCpu
char g_auto_reason_buf[160];

// One line on stderr (unless SPROFIL_QUIET): sprofil moved out of the program's way or stopped.
void note(const char* fmt, ...) {
  if (secure_getenv("SPROFIL_QUIET")) return;
  char line[320];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > 0) {
    const ssize_t w = write(2, line, static_cast<size_t>(n) < sizeof line ? n : sizeof line - 1);
    (void)w;
  }
}

pid_t gettid_() {
  return static_cast<pid_t>(syscall(SYS_gettid));
}

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

// ITIMER_PROF: the interval (0 when another clock runs) and the process CPU periods credited
// so far. The kernel sends at most one SIGPROF per check, and a process-directed SIGPROF that
// is still pending absorbs the next one; so each signal is weighted by the periods of process
// CPU time that elapsed since the last one credited (clock_gettime is async-signal-safe).
std::atomic<uint64_t> g_itimer_interval{0};
std::atomic<uint64_t> g_itimer_credited{0};

uint64_t process_cpu_ns() {
  timespec ts;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t itimer_weight() {
  const uint64_t interval = g_itimer_interval.load(std::memory_order_relaxed);
  if (interval == 0) return 1;
  const uint64_t elapsed = process_cpu_ns() / interval;
  uint64_t credited = g_itimer_credited.load(std::memory_order_relaxed);
  for (;;) {
    if (elapsed <= credited) return 0;  // no whole period since the last: the next gets it
    if (g_itimer_credited.compare_exchange_weak(credited, elapsed, std::memory_order_relaxed))
      return elapsed - credited;
  }
}

// The cpu and wall clocks' kernel part: the thread's system time since the last sample
// (getrusage(RUSAGE_THREAD), a plain system call: about 240 ns per sample here, measured in
// bench/bench_handler.cpp) in whole intervals, at most the sample's weight; the rest carries to
// the next sample. The kernel accounts that time by its tick (a tick that lands in the kernel
// counts as system time), which is also when a CPU-time timer fires: the two agree on what a
// period was spent on. g_split_interval is the interval while such a clock runs, else 0; a
// thread's first sample of a clock generation (g_split_gen: bumped at each start and in a
// forked child) only sets its base.
std::atomic<uint64_t> g_split_interval{0};
std::atomic<uint64_t> g_split_gen{1};
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_split_gen;
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_split_credited;  // ns

uint64_t timer_system_part(uint64_t w) {
  const uint64_t interval = g_split_interval.load(std::memory_order_relaxed);
  if (interval == 0) return 0;
  rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) != 0) return 0;
  const uint64_t st = static_cast<uint64_t>(ru.ru_stime.tv_sec) * 1000000000u +
                      static_cast<uint64_t>(ru.ru_stime.tv_usec) * 1000u;
  const uint64_t gen = g_split_gen.load(std::memory_order_acquire);
  if (t_split_gen != gen) {
    t_split_gen = gen;
    t_split_credited = st;
    return 0;
  }
  if (st <= t_split_credited) return 0;
  uint64_t n = (st - t_split_credited) / interval;
  if (n > w) n = w;
  t_split_credited += n * interval;
  return n;
}

// The weight of a signal if it is one of our samples, else 0 (not ours, or no whole period
// elapsed since the last one: its time is credited to the next), and in *system_w the part
// of it spent in the kernel where the clock tells (only perf: clock_splits_system()).
uint64_t sample_weight(const siginfo_t* si, uint64_t* system_w) {
  *system_w = 0;
  switch (si->si_code) {
    case SI_TIMER:  // our POSIX timers
      if (si->si_value.sival_ptr != &g_cookie) return 0;
      // Each overrun is an expiry the kernel folded into this signal (its tick is coarser
      // than our interval): weighting by them keeps count x interval equal to the time.
      {
        const uint64_t w = 1 + static_cast<uint64_t>(si->si_overrun > 0 ? si->si_overrun : 0);
        *system_w = timer_system_part(w);
        return w;
      }
    case POLL_IN:  // a perf event overflow (F_SETSIG)
    case POLL_HUP:
      return perf::is_ours(si->si_fd) ? perf::signal_weight(si->si_fd, system_w) : 0;
    case SI_KERNEL:  // ITIMER_PROF: ours only while the itimer clock runs
      return g_itimer_interval.load(std::memory_order_relaxed) ? itimer_weight() : 0;
    default:  // kill(), sigqueue(), tgkill(): not ours
      return 0;
  }
}

void on_signal(int, siginfo_t* si, void* uc) {
  const int saved_errno = errno;
  uint64_t system_w = 0;
  if (const uint64_t weight = sample_weight(si, &system_w))
    engine::global().sample(pc_of(uc), weight, system_w);
  errno = saved_errno;
}

timespec to_ts(uint64_t ns) {
  return timespec{static_cast<time_t>(ns / 1000000000u), static_cast<long>(ns % 1000000000u)};
}

// The CPU-time clock of any thread of this process (the kernel's MAKE_THREAD_CPUCLOCK).
clockid_t thread_cpu_clock(pid_t tid) {
  return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 4u /*per-thread*/ |
                                2u /*sched*/);
}

bool handler_is_ours(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_signal;
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

// SIGPROF unless the application has a handler on it (or SPROFIL_SIGNAL says otherwise);
// then the highest free real-time signal. ITIMER_PROF can only send SIGPROF. A signal the
// program has claimed through the interposers (even with SIG_IGN) is never free.
int choose_signal(ClockKind kind, int* err) {
  const int want = configured_signal();
  if (want < 0 || (want > 0 && kind == ClockKind::kItimer && want != SIGPROF)) {
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
  if (kind == ClockKind::kItimer) {
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

Slot* find_slot(pid_t tid) {
  for (int i = 0; i < g_nslots; ++i)
    if (g_slots[i].tid == tid) return &g_slots[i];
  return nullptr;
}

Slot* add_slot(pid_t tid) {
  if (Slot* s = find_slot(tid)) return s;
  if (g_nslots == g_capslots) {
    const int cap = g_capslots ? g_capslots * 2 : 64;
    auto* n = static_cast<Slot*>(realloc(g_slots, sizeof(Slot) * static_cast<size_t>(cap)));
    if (!n) return nullptr;
    g_slots = n;
    g_capslots = cap;
  }
  g_slots[g_nslots] = Slot{tid, false, timer_t{}, nullptr};
  return &g_slots[g_nslots++];
}

void remove_slot(Slot* s) {
  *s = g_slots[--g_nslots];
}

uint64_t g_rng_state = 0;  // guarded by g_mu

// Uniform in (0, period].
uint64_t random_phase(uint64_t period) {
  if (g_rng_state == 0) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    g_rng_state =
        (static_cast<uint64_t>(ts.tv_nsec) ^ (static_cast<uint64_t>(getpid()) << 32)) | 1u;
  }
  uint64_t x = g_rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  g_rng_state = x;
  return period ? 1 + (x >> 11) % period : 1;
}

int arm_timer(Slot* s);

int arm_perf(Slot* s) {
  if (s->event) return 0;
  auto* ev = static_cast<perf::Event*>(malloc(sizeof(perf::Event)));
  if (!ev) return ENOMEM;
  const uint64_t first = random_phase(g_clock.interval_ns);
  if (int e = perf::open_event(s->tid, g_clock.interval_ns, first, g_signo, g_perf_ring, ev)) {
    free(ev);
    // No fd can be kept out of the program's reach (perf.hpp, place_fd): this thread uses a
    // CPU-time timer instead, which needs no fd and measures the same time.
    if (e == perf::kNoFdRoom) {
      static bool said = false;
      if (!said)
        note(
            "sprofil: RLIMIT_NOFILE leaves no fd out of the program's reach; threads that "
            "get no perf event use the CPU-time timers\n");
      said = true;
      return arm_timer(s);
    }
    return e;
  }
  s->event = ev;
  return 0;
}

int arm_thread(Slot* s) {
  if (g_clock.kind == ClockKind::kPerf) return s->has_timer ? 0 : arm_perf(s);
  if (g_clock.kind == ClockKind::kItimer) return 0;
  return arm_timer(s);
}

int arm_timer(Slot* s) {
  if (s->has_timer) return 0;
  const clockid_t cid =
      g_clock.kind == ClockKind::kWall ? CLOCK_MONOTONIC : thread_cpu_clock(s->tid);
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = g_signo;
  sev.sigev_value.sival_ptr = const_cast<char*>(&g_cookie);
  sev._sigev_un._tid = s->tid;
  if (real_timer_create(cid, &sev, &s->timer) != 0) return errno;
  // The first period has a random phase, uniform in (0, P]: a thread that runs for c < P
  // then gets one sample with probability c/P, so short threads keep their expected share.
  const itimerspec its{to_ts(g_clock.interval_ns), to_ts(random_phase(g_clock.interval_ns))};
  if (timer_settime(s->timer, 0, &its, nullptr) != 0) {
    const int e = errno;
    timer_delete(s->timer);
    return e;
  }
  s->has_timer = true;
  return 0;
}

void disarm_thread(Slot* s) {
  if (s->event) {
    perf::close_event(s->event);
    free(s->event);
    s->event = nullptr;
  }
  if (!s->has_timer) return;
  timer_delete(s->timer);
  s->has_timer = false;
}

// Threads that exist but did not come through our pthread_create (they predate the library,
// or were made with clone directly) are found in /proc/self/task.
void scan_threads() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return;
  const pid_t drainer = perf::drainer_tid();
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const auto tid = static_cast<pid_t>(atoi(e->d_name));
    if (tid != drainer) add_slot(tid);
  }
  closedir(d);
}

int set_itimer(uint64_t interval_ns) {
  if (interval_ns) g_itimer_credited.store(process_cpu_ns() / interval_ns);
  g_itimer_interval.store(interval_ns);
  const timeval tv{static_cast<time_t>(interval_ns / 1000000000u),
                   static_cast<suseconds_t>((interval_ns % 1000000000u) / 1000u)};
  const itimerval it{tv, tv};
  return real_setitimer(ITIMER_PROF, &it, nullptr) == 0 ? 0 : errno;
}

void disarm_all() {
  for (int i = 0; i < g_nslots; ++i) disarm_thread(&g_slots[i]);
  if (g_clock.kind == ClockKind::kItimer) set_itimer(0);
}

// Arms every known thread (and ITIMER_PROF). A thread that has exited since it was seen is
// forgotten. Fails only if the calling thread itself cannot be armed.
int arm_all() {
  if (g_clock.kind == ClockKind::kItimer) return set_itimer(g_clock.interval_ns);
  const pid_t self = gettid_();
  for (int i = 0; i < g_nslots;) {
    const int e = arm_thread(&g_slots[i]);
    if (e != 0 && g_slots[i].tid == self) return e;
    if (e != 0) {
      remove_slot(&g_slots[i]);
      continue;
    }
    ++i;
  }
  return 0;
}

// kAuto: the perf clock where perf_event_open allows it, else the CPU timers.
ClockRequest resolve(const ClockRequest& c) {
  if (c.kind != ClockKind::kAuto) return c;
  ClockRequest r = c;
  const int e = perf::probe(c.interval_ns);
  if (e == 0) {
    g_auto_reason = "";
    r.kind = ClockKind::kPerf;
  } else {
    snprintf(g_auto_reason_buf, sizeof g_auto_reason_buf,
             "perf_event_open failed (%s%s); using the CPU-time timers", strerror(e),
             e == EACCES || e == EPERM ? ": see /proc/sys/kernel/perf_event_paranoid" : "");
    g_auto_reason = g_auto_reason_buf;
    r.kind = ClockKind::kCpu;
  }
  return r;
}

int start_clock(const ClockRequest& req) {
  const ClockRequest c = resolve(req);
  if (c.interval_ns == 0 || c.interval_ns > 1000000000ull * 3600) return EINVAL;
  if (c.kind == ClockKind::kPerf) {
    if (int e = perf::probe(c.interval_ns)) return e;
    const char* mode = secure_getenv("SPROFIL_PERF_MODE");
    g_perf_ring = mode && strcmp(mode, "ring") == 0;
    perf::new_generation(c.interval_ns);
    const char* jitter = secure_getenv("SPROFIL_JITTER");
    perf::set_jitter(!(jitter && strcmp(jitter, "0") == 0));
  }
  int err = 0;
  const int signo = choose_signal(c.kind, &err);
  if (!signo) return err;
  if (int e = install_handler(signo)) return e;
  if (c.kind == ClockKind::kPerf && g_perf_ring) {
    if (int e = perf::start_drainer()) {
      restore_handler(signo);
      return e;
    }
  }
  g_signo = signo;
  g_signo_now.store(signo, std::memory_order_release);
  g_clock = c;
  g_clock_kind_now.store(static_cast<uint8_t>(c.kind), std::memory_order_relaxed);
  g_split_gen.fetch_add(1, std::memory_order_release);
  g_split_interval.store(
      c.kind == ClockKind::kCpu || c.kind == ClockKind::kWall ? c.interval_ns : 0,
      std::memory_order_relaxed);
  g_active = true;
  scan_threads();
  add_slot(gettid_());
  if (int e = arm_all()) {
    disarm_all();
    perf::stop_drainer();
    restore_handler(signo);
    g_active = false;
    g_split_interval.store(0, std::memory_order_relaxed);
    g_signo = 0;
    g_signo_now.store(0, std::memory_order_release);
    return e;
  }
  return 0;
}

void stop_clock() {
  if (!g_active) return;
  disarm_all();
  g_split_interval.store(0, std::memory_order_relaxed);
  perf::stop_drainer();
  g_signo_now.store(0, std::memory_order_release);
  restore_handler(g_signo);
  g_active = false;
  g_signo = 0;
}

bool same_clock(const ClockRequest& a, const ClockRequest& b) {
  // A running clock is resolved: kAuto matches whatever it resolved to.
  return (a.kind == b.kind || a.kind == ClockKind::kAuto) && a.interval_ns == b.interval_ns;
}

// g_mu with every signal blocked in the holding thread (see the audit at the top).
// The mask is restored after the mutex is released (members are destroyed in reverse).
struct BlockAll {
  BlockAll() {
    sigset_t all;
    sigfillset(&all);
    real_sigmask(SIG_BLOCK, &all, &saved);
  }
  ~BlockAll() { real_sigmask(SIG_SETMASK, &saved, nullptr); }
  sigset_t saved;
  BlockAll(const BlockAll&) = delete;
  BlockAll& operator=(const BlockAll&) = delete;
};
struct Lock {
  BlockAll blocked;
  util::MutexGuard held{&g_mu};
};

// --- thread lifecycle ------------------------------------------------------------------

void thread_exiting(void*) {
  Lock lock;
  if (Slot* s = find_slot(gettid_())) {
    disarm_thread(s);
    remove_slot(s);
  }
}

// Threads that ended without their key destructor (raw SYS_exit) keep a slot, and with it a
// timer or a perf event (an fd). tgkill(sig 0) tells whether a tid still lives. With g_mu.
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

void thread_started() {
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
    if (s && g_active) arm_thread(s);
  }
  if (g_exit_key_ok) pthread_setspecific(g_exit_key, &g_cookie);
}

__attribute__((tls_model("initial-exec"))) thread_local sigset_t t_fork_mask;

void atfork_prepare() {
  sigset_t all;
  sigfillset(&all);
  real_sigmask(SIG_BLOCK, &all, &t_fork_mask);
  util::ForkSafeMutex<&g_mu>::prepare();
}
void atfork_parent() {
  util::ForkSafeMutex<&g_mu>::parent();
  real_sigmask(SIG_SETMASK, &t_fork_mask, nullptr);
}
void atfork_child_locked();
void atfork_child() {
  // Only the forking thread exists in the child, and no POSIX timer or itimer was inherited.
  util::ForkSafeMutex<&g_mu>::child();
  atfork_child_locked();
  real_sigmask(SIG_SETMASK, &t_fork_mask, nullptr);
}
void atfork_child_locked() {
  g_pid = getpid();
  // Inherited perf fds still name the parent's threads: drop our references only.
  for (int i = 0; i < g_nslots; ++i)
    if (g_slots[i].event) {
      perf::forget_event(g_slots[i].event);
      free(g_slots[i].event);
    }
  perf::reset_after_fork();
  g_nslots = 0;
  g_split_gen.fetch_add(1, std::memory_order_release);  // our TLS holds the parent's stime
  if (!g_active) return;
  if (g_hooks.after_fork_child) g_hooks.after_fork_child();
  if (g_clock.kind == ClockKind::kPerf) {
    perf::new_generation(g_clock.interval_ns);  // our TLS holds the parent's thread's state
    if (g_perf_ring) perf::start_drainer();
  }
  add_slot(gettid_());
  arm_all();
}

__attribute__((constructor(101))) void runtime_init() {
  g_pid = getpid();
  g_exit_key_ok = pthread_key_create(&g_exit_key, thread_exiting) == 0;
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

// With g_mu: see check_masks().
void check_masks_locked() {
  if (!g_active || g_clock.kind == ClockKind::kItimer || g_signo > 64) return;
  static bool said = false;
  if (said) return;
  const pid_t self = gettid_();  // blocks everything while it holds g_mu: not a finding
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

}  // namespace

int install(engine::Channel ch, engine::Table* table, const ClockRequest& clock,
            engine::Table** old) {
  Lock lock;
  *old = nullptr;
  engine::Engine& eng = engine::global();
  // The program uses ITIMER_PROF (or SIGPROF): the itimer clock gives way to the cpu clock.
  ClockRequest want = clock;
  if (want.kind == ClockKind::kItimer && g_itimer_taken) want.kind = ClockKind::kCpu;
  bool others = false;
  for (unsigned c = 0; c < engine::kChannels; ++c)
    if (c != ch && eng.current(static_cast<engine::Channel>(c))) others = true;

  if (!table) {
    if (!others) {
      check_masks_locked();
      stop_clock();
    }
    *old = eng.exchange(ch, nullptr);
    return 0;
  }
  if (!g_active) {
    // Publish first so the first sample already finds the table.
    engine::Table* prev = eng.exchange(ch, table);
    if (int e = start_clock(want)) {
      eng.exchange(ch, prev);
      return e;
    }
    *old = prev;
    return 0;
  }
  if (!same_clock(want, g_clock)) {
    // A session never changes another's clock or rate (its profile would keep a part of the
    // time under a header that names the first clock): refuse, and say why once.
    if (others) {
      static bool said = false;
      if (!said)
        note(
            "sprofil: refused a second profiling session asking for the %s clock at %llu Hz: "
            "the %s clock runs at %llu Hz for another (EBUSY)\n",
            clock_name(want.kind), 1000000000ull / want.interval_ns, clock_name(g_clock.kind),
            1000000000ull / g_clock.interval_ns);
      said = true;
      return EBUSY;
    }
    // The only user changes its own clock: stop and start it anew.
    const ClockRequest was = g_clock;
    stop_clock();
    if (int e = start_clock(want)) {
      start_clock(was);
      return e;
    }
  }
  *old = eng.exchange(ch, table);
  return 0;
}

// --- the program's view of its signals and timers ----------------------------------------

int current_signal() {
  return g_signo_now.load(std::memory_order_acquire);
}

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
  if (getpid() != g_pid) return false;  // a vfork child: its own itimer
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

void reap_threads() {
  if (getpid() != g_pid) return;  // a vfork child: the registry is its parent's
  Lock lock;
  reap_locked();
}

void check_masks() {
  Lock lock;
  check_masks_locked();
}

ClockKind last_clock_kind() {
  return static_cast<ClockKind>(g_clock_kind_now.load(std::memory_order_relaxed));
}

bool running_clock(ClockRequest* out) {
  Lock lock;
  if (out) *out = g_clock;
  return g_active;
}

bool parse_clock(const char* name, ClockKind* out) {
  static const char* const names[] = {"cpu", "itimer", "perf", "wall", "auto"};
  for (unsigned i = 0; i < 5; ++i) {
    if (strcmp(name, names[i]) == 0) {
      *out = static_cast<ClockKind>(i);
      return true;
    }
  }
  return false;
}

const char* clock_name(ClockKind k) {
  switch (k) {
    case ClockKind::kCpu:
      return "cpu";
    case ClockKind::kItimer:
      return "itimer";
    case ClockKind::kPerf:
      return "perf";
    case ClockKind::kWall:
      return "wall";
    case ClockKind::kAuto:
      return "auto";
  }
  return "?";
}

bool clock_splits_system(ClockKind k) {
  return k == ClockKind::kPerf || k == ClockKind::kCpu || k == ClockKind::kWall;
}

const char* auto_fallback_reason() {
  Lock lock;
  return g_auto_reason;
}

void set_hooks(const Hooks& hooks) {
  Lock lock;
  g_hooks = hooks;
}

int signal_number() {
  Lock lock;
  return g_signo;
}

int armed_threads() {
  Lock lock;
  if (!g_active) return 0;
  if (g_clock.kind == ClockKind::kItimer) return 1;
  int n = 0;
  for (int i = 0; i < g_nslots; ++i) n += g_slots[i].has_timer || g_slots[i].event;
  return n;
}

void before_exec() {
  // A vfork child shares our memory but has none of our timers: touch nothing.
  if (getpid() != g_pid) return;
  Lock lock;
  if (!g_active) return;
  if (g_hooks.before_exec) g_hooks.before_exec();
  stop_clock();
  g_exec_suspended = true;
}

void after_failed_exec() {
  if (getpid() != g_pid) return;
  Lock lock;
  if (!g_exec_suspended) return;
  g_exec_suspended = false;
  if (start_clock(g_clock) == 0 && g_hooks.after_failed_exec) g_hooks.after_failed_exec();
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
  sprofil::rt::set_virtual_blocked(a.vblocked);
  sprofil::rt::thread_started();
  return a.fn(a.arg);
}

using pthread_create_fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
}  // namespace

extern "C" __attribute__((visibility("default"))) int pthread_create(pthread_t* thread,
                                                                     const pthread_attr_t* attr,
                                                                     void* (*fn)(void*),
                                                                     void* arg) {
  static std::atomic<pthread_create_fn> real{nullptr};
  const pthread_create_fn f = sprofil::rt::real_fn(real, "pthread_create");
  if (!f) return EAGAIN;
  auto* a = static_cast<StartArgs*>(malloc(sizeof(StartArgs)));
  if (!a) return f(thread, attr, fn, arg);
  a->fn = fn;
  a->arg = arg;
  a->vblocked = sprofil::rt::virtual_blocked();
  const int rc = f(thread, attr, start_trampoline, a);
  if (rc != 0) free(a);
  return rc;
}
