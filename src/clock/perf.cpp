#include "clock/perf.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"
#include "clock/perf_ring.hpp"
#include "clock/runtime.hpp"
#include "engine/engine.hpp"
#include "util/clock_ns.hpp"
#include "util/mutex.hpp"
#include "util/xorshift.hpp"

namespace sprofil::rt::perf {
namespace {

constexpr int kMaxFd = 1 << 16;
// The drainer wakes when a buffer is half full, and at least this often. Its CPU time is
// sprofil's own and is not sampled: waking less often keeps it small.
constexpr int kDrainIntervalMs = 20;
constexpr size_t kPage = 4096;

// Signal mode's tables by fd, read by the handler (1 MiB of bss, of which only the pages of
// the fds in use are ever touched: fd_tables()).
struct FdTables {
  // One bit per fd: set while the fd is one of our signal-mode events.
  std::atomic<uint64_t> ours[kMaxFd / 64];
  // The phase of its event (Event::phase), and its thread's CPU clock when it was opened (0:
  // unknown; base_at_open).
  std::atomic<uint64_t> phase[kMaxFd];
  std::atomic<uint64_t> cpu_open[kMaxFd];
};
FdTables g_fd;
// A budget this large has its top kTopFds fds reached last (when nothing fits above it).
constexpr uint64_t kMinBudget = 1024;
constexpr uint64_t kTopFds = 256;

void mark(int fd, bool on) {
  if (fd < 0 || fd >= kMaxFd) return;
  const uint64_t bit = uint64_t{1} << (fd % 64);
  if (on)
    g_fd.ours[fd / 64].fetch_or(bit, std::memory_order_release);
  else
    g_fd.ours[fd / 64].fetch_and(~bit, std::memory_order_release);
}

}  // namespace

namespace {

// Ring buffers being drained, guarded by g_ring_mu (never by the runtime mutex, so that the
// runtime can join the drainer while holding its own).
pthread_mutex_t g_ring_mu = PTHREAD_MUTEX_INITIALIZER;
Event* g_rings[1024];
int g_nrings = 0;
RuntimeThread g_drainer{};

// Counts the records in one ring buffer. With g_ring_mu held.
void drain(Event* e) {
  engine::Engine& eng = engine::global();
  read_records(e->ring, kRingDataPages * kPage,
               [&](const perf_event_header& h, const RingData& d, uint64_t at) {
                 uint64_t body[2];  // SAMPLE: ip, value; LOST: id, count
                 d.body(at, h, body, sizeof body);
                 if (h.type == PERF_RECORD_SAMPLE) {
                   if (!e->period_set) {  // the random first period is over: back to P
                     ioctl(e->fd, PERF_EVENT_IOC_PERIOD, &e->period);
                     e->period_set = true;
                     e->credits.next_ns = first_user_ns(e->period, e->phase);
                   }
                   uint64_t system_w = 0;
                   // The thread's CPU clock through its clock id, which any thread of the process
                   // may read.
                   const uint64_t v =
                       steal_free(body[1] + e->phase, e->period, e->period, &e->credits,
                                  [e] { return util::clock_ns(thread_cpu_clock(e->tid)); });
                   if (e->unthrottled) {
                     e->unthrottled = false;
                     if (const uint64_t n = drop_throttled(v, e->period, e->period, &e->credits))
                       eng.lost(n);
                   }
                   const uint64_t w = credit(v, e->period, &e->credits, &system_w);
                   e->credits.next_ns = 0;
                   if (w) eng.sample(static_cast<uintptr_t>(body[0]), w, system_w);
                 } else if (h.type == PERF_RECORD_LOST) {
                   drop_lost(body[1], e->period, &e->credits);
                   eng.lost(body[1]);
                 } else if (h.type == PERF_RECORD_UNTHROTTLE) {
                   e->unthrottled = true;
                 }
               });
}

std::atomic<bool> g_jitter{true};
void* drainer_main(void*) {
  runtime_thread_begin(&g_drainer);
  while (!g_drainer.stop.load(std::memory_order_acquire)) {
    pollfd fds[1024];
    int n = 0;
    {
      util::MutexGuard lock(&g_ring_mu);
      for (int i = 0; i < g_nrings; ++i) fds[n++] = pollfd{g_rings[i]->fd, POLLIN, 0};
    }
    if (n > 0) {
      poll(fds, static_cast<nfds_t>(n), kDrainIntervalMs);
    } else {
      const timespec ts{0, kDrainIntervalMs * 1000000L};
      nanosleep(&ts, nullptr);
    }
    util::MutexGuard lock(&g_ring_mu);
    // No jitter in ring mode: re-drawing the period from this thread (an IPI to the sampled
    // thread's CPU) for a whole drain interval at a time skewed shares by about half a point
    // (bench/compare); ring mode is the opt-in, cheaper mode, with docs/agent.md's caveat.
    for (int i = 0; i < g_nrings; ++i) drain(g_rings[i]);
  }
  return nullptr;
}

using pthread_create_fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

}  // namespace

int probe(uint64_t period_ns) {
  perf_event_attr a = make_attr(period_ns, Delivery::kSignal);
  const int fd = sys_perf_event_open(&a, 0);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

namespace {
int prlimit_nofile(const rlimit* set, rlimit* get) {
  // The raw system call: never an interposed getrlimit/setrlimit.
  return static_cast<int>(syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, set, get));
}

// Moves fd out of the program's reach (see open_event), or closes it and returns kNoFdRoom.
int place_fd(int fd) {
  rlimit rl;
  if (prlimit_nofile(nullptr, &rl) != 0) return fd;
  const uint64_t soft = rl.rlim_cur, hard = rl.rlim_max;
  if (soft < static_cast<uint64_t>(kMaxFd) && hard > soft) {
    rlimit up = rl;
    up.rlim_cur = hard < static_cast<uint64_t>(kMaxFd) ? hard : kMaxFd;
    if (prlimit_nofile(&up, nullptr) == 0) {
      const int nfd = fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(soft));
      // The limit back as it was, unless a thread of the program set one meanwhile (its
      // setrlimit came between the two calls): then the program's is put back. prlimit64's
      // set-and-get is atomic, so no later change is undone.
      rlimit during{};
      if (prlimit_nofile(&rl, &during) == 0 &&
          (during.rlim_cur != up.rlim_cur || during.rlim_max != up.rlim_max))
        prlimit_nofile(&during, nullptr);
      if (nfd >= 0) {
        close(fd);
        return nfd;
      }
    }
  }
  const uint64_t top = soft < static_cast<uint64_t>(kMaxFd) ? soft : kMaxFd;
  if (top >= kMinBudget) {
    const int nfd = fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(top - kTopFds));
    if (nfd >= 0) {
      close(fd);
      return nfd;
    }
  }
  close(fd);
  return kNoFdRoom;
}
}  // namespace

int place_out_of_reach(int fd) {
  return place_fd(fd);
}

bool fd_room() {
  rlimit rl;
  if (prlimit_nofile(nullptr, &rl) != 0) return true;
  return (rl.rlim_cur < static_cast<uint64_t>(kMaxFd) && rl.rlim_max > rl.rlim_cur) ||
         rl.rlim_cur >= kMinBudget;
}

int open_event(pid_t tid, uint64_t period_ns, uint64_t first_ns, int signo, bool ring, Event* out) {
  *out = Event{};
  if (first_ns == 0 || first_ns > period_ns) first_ns = period_ns;
  // No room out of the program's reach: say so before opening, not after. The event's fd
  // would hold the program's lowest free fd until closed again, and a thread of the program
  // opening files at its limit (harm NofileBudgetKeptByTheClock, `ulimit -n 16`) got EMFILE
  // one fd early in that moment.
  if (!fd_room()) return kNoFdRoom;
  perf_event_attr a =
      make_attr(first_overflow(period_ns, first_ns), ring ? Delivery::kRing : Delivery::kSignal);
  const int fd0 = sys_perf_event_open(&a, tid);
  if (fd0 < 0) return errno;
  const int fd = place_fd(fd0);
  if (fd < 0) return fd;
  if (fd >= kMaxFd) {
    close(fd);
    return EMFILE;
  }
  out->fd = fd;
  out->tid = tid ? tid : static_cast<pid_t>(syscall(SYS_gettid));
  out->period = period_ns;
  out->phase = period_ns - first_ns;
  g_fd.phase[fd].store(out->phase, std::memory_order_relaxed);
  const uint64_t cpu_open = util::clock_ns(thread_cpu_clock(out->tid));
  g_fd.cpu_open[fd].store(cpu_open, std::memory_order_relaxed);
  if (cpu_open) base_at_open(cpu_open, out->phase, &out->credits);
  if (ring) {
    const size_t bytes = (1 + kRingDataPages) * kPage;
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      const int e = errno;
      close(fd);
      *out = Event{};
      return e;
    }
    out->ring = m;
    out->ring_bytes = bytes;
    bool room;
    {
      util::MutexGuard lock(&g_ring_mu);
      room = g_nrings < static_cast<int>(sizeof g_rings / sizeof g_rings[0]);
      if (room) g_rings[g_nrings++] = out;
    }
    if (!room) {
      munmap(m, bytes);
      close(fd);
      *out = Event{};
      return EMFILE;
    }
  } else {
    f_owner_ex owner{F_OWNER_TID, tid};
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) != 0 || fcntl(fd, F_SETSIG, signo) != 0 ||
        fcntl(fd, F_SETOWN_EX, &owner) != 0) {
      const int e = errno;
      close(fd);
      *out = Event{};
      return e;
    }
    mark(fd, true);
  }
  if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
    const int e = errno;
    close_event(out);
    return e;
  }
  return 0;
}

namespace {
void credit_at_close(const Event& e);
}  // namespace

void close_event(Event* e) {
  if (e->fd < 0) return;
  ioctl(e->fd, PERF_EVENT_IOC_DISABLE, 0);
  if (!e->ring && e->tid == gettid_()) credit_at_close(*e);
  if (e->ring) {
    {
      util::MutexGuard lock(&g_ring_mu);
      drain(e);
      for (int i = 0; i < g_nrings; ++i)
        if (g_rings[i] == e) {
          g_rings[i] = g_rings[--g_nrings];
          break;
        }
    }
    munmap(e->ring, e->ring_bytes);
  }
  mark(e->fd, false);
  close(e->fd);
  *e = Event{};
}

void credit_own_at_exit(Event* e) {
  if (!e->ring && e->tid == gettid_()) close_event(e);  // no ring: no mutex, signal-safe
}

void forget_event(Event* e) {
  if (e->fd < 0) return;
  if (e->ring) munmap(e->ring, e->ring_bytes);
  mark(e->fd, false);
  close(e->fd);  // the child's reference only; the parent's event lives on
  *e = Event{};
}

namespace {
std::atomic<uint64_t> g_generation{1};
std::atomic<uint64_t> g_period{1};
// Per-thread: the generation of its event, the periods credited to it so far, the state of
// its jitter generator, and the counter when its period was last restarted.
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_generation;
__attribute__((tls_model("initial-exec"))) thread_local Credit t_credit;
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_rng;
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_jitter_left;
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_restart;
// The read skip's anchor (Anchor, perf.hpp).
__attribute__((tls_model("initial-exec"))) thread_local Anchor t_anchor;

// Re-draws the period at the end of each block of samples (jitter_block, perf.hpp; *left
// counts the samples still to take at this one). `value` is the counter now, `cur` the period
// running. Returns the new period, or 0 if it stays. The ioctl restarts the period from now, not
// from the overflow this handler serves: the time since that overflow (its delivery and the handler
// so far) would lengthen the block's first period. On the 2-core VM of docs/benchmarks.md that is
// about half a period at 10 kHz, and the restarts alone cost 4.5% of the signals per CPU-second.
// The overflows fall at the restart's counter plus whole periods, so that time is known; each of
// the block's n periods is shortened by 1/n of it, and the block lasts n drawn periods from its
// first overflow on, as it would without the restart. Measured with cmp-perf-signal-floor: a
// re-draw at every sample cost 1.57x the empty-handler floor at 10 kHz and 29% fewer signals,
// every fourth sample 1.15x and 9% fewer.
uint64_t jitter(int fd, uint64_t value, uint64_t cur, uint64_t period, uint64_t* rng,
                uint64_t* left) {
  if (*left > 1) {
    --*left;
    return 0;
  }
  const uint64_t n = *left = jitter_block(rng, period, t_credit.periods);
  uint64_t next = jittered_period(period, rng);
  const uint64_t since = into_period(value, t_restart, cur);
  if (since / n < next / 2) next -= since / n;
  if (ioctl(fd, PERF_EVENT_IOC_PERIOD, &next) != 0) return 0;
  t_restart = value;
  return next;
}

// Signal mode: starts the calling thread's credit for its event on fd in generation gen (its
// first signal, or its close before any): nothing credited yet, and the thread's CPU clock at
// the opening is the steal check's base. Signal-safe.
void start_credit(int fd, uint64_t phase, uint64_t gen) {
  t_generation = gen;
  t_credit = Credit{};
  if (const uint64_t cpu_open =
          fd >= 0 && fd < kMaxFd ? g_fd.cpu_open[fd].load(std::memory_order_relaxed) : 0)
    base_at_open(cpu_open, phase, &t_credit);
}

// steal_free() for the calling thread's own event: its CPU clock is exact. Signal-safe.
uint64_t own_steal_free(uint64_t value, uint64_t period) {
  return steal_free(value, period, period, &t_credit,
                    [] { return util::clock_ns(CLOCK_THREAD_CPUTIME_ID); });
}

// Signal mode, when a thread's own event closes (its key destructor at its end, or the
// process's stop on the main thread; under g_mu, with every signal blocked, so the handler
// cannot run in between and a late signal finds the fd no longer ours): the whole periods its
// counter passed since the last credited overflow. They ended while the thread was in the
// kernel, where an overflow raises no signal, and no later signal will credit them: the
// thread's exit, or, in a thread shorter than a period, the agent's own calls right after
// the event opened. Credited as kernel time at the thread's start routine (the program's entry
// point for the main thread), as the record parent does in drain mode for a thread without a
// later sample. Before, tests/harm's 2,000 threads of half a period measured 0.91-0.96 of
// their CPU time in signal mode (0.88-0.98 beside a busy loop).
void credit_at_close(const Event& e) {
  uint64_t value = 0;
  if (read(e.fd, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) return;
  const uint64_t gen = g_generation.load(std::memory_order_acquire);
  // No signal yet: nothing of this event was credited.
  if (t_generation != gen) start_credit(e.fd, e.phase, gen);
  const uint64_t elapsed = own_steal_free(value + e.phase, e.period) / e.period;
  if (elapsed <= t_credit.periods) return;
  const uint64_t w = elapsed - t_credit.periods;
  t_credit.periods = elapsed;
  uintptr_t pc = thread_start();
  if (pc == 0 && e.tid == getpid()) pc = static_cast<uintptr_t>(getauxval(AT_ENTRY));
  if (pc) engine::global().sample(pc, w, w);
}

}  // namespace

void set_jitter(bool on) {
  g_jitter.store(on, std::memory_order_relaxed);
}

void new_generation(uint64_t period_ns) {
  g_period.store(period_ns ? period_ns : 1, std::memory_order_relaxed);
  g_generation.fetch_add(1, std::memory_order_release);
}

uint64_t signal_weight(int fd, uint64_t* system_w) {
  *system_w = 0;
  const uint64_t now = util::clock_ns(CLOCK_MONOTONIC_RAW);
  const uint64_t gen = g_generation.load(std::memory_order_acquire);
  const uint64_t period = g_period.load(std::memory_order_relaxed);
  const uint64_t phase =
      fd >= 0 && fd < kMaxFd ? g_fd.phase[fd].load(std::memory_order_relaxed) : 0;
  const bool first = t_generation != gen;
  const bool jitter_on = g_jitter.load(std::memory_order_relaxed);
  // A re-draw is due at this signal: it needs the counter (jitter()).
  const bool redraw = jitter_on && t_jitter_left <= 1;
  uint64_t value = 0;
  const bool read_it =
      first || redraw || !overflow_without_read(&t_anchor, t_credit.running(period), now, &value);
  if (read_it && read(fd, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) return 1;
  if (first) {
    start_credit(fd, phase, gen);
    t_rng = (static_cast<uint64_t>(fd) + 1) * 0x9e3779b97f4a7c15ull ^ value;
    if (t_rng == 0) t_rng = 1;
    t_jitter_left = jitter_block(&t_rng, period, 0);
    t_credit.next_ns = first_user_ns(period, phase);
  }
  // Credited with the length of the period that just ended; then the next one is set.
  const uint64_t w = credit(own_steal_free(value + phase, period), period, &t_credit, system_w);
  if (first) {  // the first period was a random phase: from now on, whole periods
    uint64_t p = period;
    ioctl(fd, PERF_EVENT_IOC_PERIOD, &p);
    t_credit.next_ns = 0;
    t_restart = value;
  }
  if (jitter_on) {
    if (const uint64_t next =
            jitter(fd, value, t_credit.running(period), period, &t_rng, &t_jitter_left))
      t_credit.next_ns = next;
  }
  if (read_it)  // a new anchor, on the grid as it stands after any restart above
    anchor_at(&t_anchor, now, value, t_restart, t_credit.running(period));
  return w;
}

bool is_ours(int fd) {
  if (fd < 0 || fd >= kMaxFd) return false;
  return (g_fd.ours[fd / 64].load(std::memory_order_acquire) >> (fd % 64)) & 1;
}

int start_drainer() {
  return start_runtime_thread(&g_drainer, drainer_main);
}

void stop_drainer() {
  stop_runtime_thread(&g_drainer);
}

pid_t drainer_tid() {
  return g_drainer.tid.load(std::memory_order_acquire);
}

void reset_after_fork() {
  pthread_mutex_init(&g_ring_mu, nullptr);
  g_nrings = 0;
  forget_runtime_thread(&g_drainer);
}

void fd_tables(const void** begin, const void** end) {
  *begin = &g_fd;
  *end = &g_fd + 1;
}

}  // namespace sprofil::rt::perf
