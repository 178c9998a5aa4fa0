// The sampler clock, the fallback where perf events are denied. Each thread has a one-shot
// POSIX timer on CLOCK_MONOTONIC (a high-resolution timer, SIGEV_THREAD_ID) that the handler
// re-arms at a jittered instant, uniform in [P/2, 3P/2) after the sample. The hrtimer fires in
// the interrupt of the CPU the thread runs on (it was armed there), so a running thread takes
// the signal at whatever instruction the interrupt hit, at an instant that owes nothing to the
// scheduler tick. The handler reads its own thread's CPU time (exact, not tick-bound) and
// credits the whole periods elapsed since its last credited sample (the remainder carries).
// A signal taken late (the thread was preempted or asleep at the expiry: its pc is then where
// the scheduler stopped it, a tick or a system call's exit) credits nothing: its time goes to
// the next prompt sample. The CPU-time timers of the cpu clock fire only at the tick, so on a
// loaded machine their samples fall into step with the time slices and skew attribution
// (docs/architecture.md); these do not.
//
// Sleeping threads: a signal to a thread in nanosleep, poll or epoll_wait makes the call
// return EINTR (harm, docs/agent.md). So (1) a thread that ran for under a quarter period
// between two samples, twice in a row, is idle: its timer is parked (not re-armed), and a
// second timer of the thread, on its own CPU clock, wakes it once it has run a quarter period
// more: a CPU-time timer fires only while its thread runs (at a tick), never into a sleep, and
// its handler re-arms the first; (2) the sleeping calls of libc are interposed
// (interpose_sleep.cpp) and block the signal while they wait, so an expiry during the wait is
// taken after it, late, and credits nothing.
//
// The clock has no thread of its own. A sampler thread in each process used to re-arm parked
// timers (it watched their threads' CPU clocks): a task more per profiled process, which
// counts toward RLIMIT_NPROC and a cgroup's pids.max (a program that forks up to its limit
// made about half its children: tests/harm `NoHarm.ProcessLimitAsNatively`), and a thread that
// made unshare(CLONE_NEWUSER) and setns fail. The per-thread records live in chunks that are
// never freed, so that a late handler cannot touch freed memory.
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "clock/clock.hpp"
#include "clock/interpose.hpp"
#include "clock/perf.hpp"
#include "engine/engine.hpp"
#include "util/clock_ns.hpp"
#include "util/xorshift.hpp"

namespace sprofil::rt {
namespace {

// A handler that runs more than this after its expiry was not running at the expiry (the
// interrupt delivers at once; an IPI to a thread that moved to another CPU takes ~10 us here).
constexpr uint64_t kLateNs = 100000;
// After this many late signals in a row a thread's time is credited anyway (a thread that
// spends long stretches in the kernel is never prompt).
constexpr uint32_t kMaxLateRun = 16;

// Samples in a row after under a quarter period of CPU time that park a thread's timer.
constexpr uint32_t kIdleRuns = 2;

// The slack of a period's end at a sample, a part of the period (ended_periods()).
constexpr uint64_t kSlackDiv = 32;

struct Rec {
  std::atomic<pid_t> tid;            // 0: free. Written under g_mu.
  std::atomic<uint32_t> parked;      // 1: idle, the timer is not armed; the sampler re-arms it
  std::atomic<uint64_t> expiry;      // CLOCK_MONOTONIC ns of the armed expiry
  std::atomic<uint64_t> armed_cpu;   // the thread's CPU ns when its timer was armed
  std::atomic<uint64_t> period_end;  // thread CPU ns where its next uncredited period ends
  std::atomic<uint32_t> late_run;    // late signals in a row (the handler's)
  std::atomic<uint32_t> idle_run;    // idle samples in a row (the handler's)
  std::atomic<uint64_t> rng;         // the handler's jitter (xorshift)
  timer_t timer;                     // set before tid is published
  timer_t wake;                      // on the thread's CPU clock: unparks it (see the top)
  bool has_wake;                     // false: the thread is never parked
  clockid_t cid;                     // the thread's CPU clock
};

constexpr int kChunk = 256;
struct Chunk {
  Rec recs[kChunk];
  std::atomic<Chunk*> next;
};
std::atomic<Chunk*> g_chunks{nullptr};  // grows under g_mu, never shrinks

// The wake timer's signals carry the record's address with this bit set (a Rec is aligned).
constexpr uintptr_t kWakeTag = 1;
static_assert(alignof(Rec) > kWakeTag, "a tag bit");

uint64_t mono_ns() {
  return util::clock_ns(CLOCK_MONOTONIC);
}

bool in_pool(const Rec* r) {
  if (reinterpret_cast<uintptr_t>(r) & kWakeTag) return false;
  for (Chunk* c = g_chunks.load(std::memory_order_acquire); c;
       c = c->next.load(std::memory_order_acquire)) {
    const auto lo = reinterpret_cast<uintptr_t>(&c->recs[0]);
    const auto p = reinterpret_cast<uintptr_t>(r);
    if (p >= lo && p < lo + sizeof c->recs && (p - lo) % sizeof(Rec) == 0) return true;
  }
  return false;
}

// With g_mu: a free record, taking a new chunk if every one is used.
Rec* alloc_rec() {
  for (Chunk* c = g_chunks.load(std::memory_order_acquire); c;
       c = c->next.load(std::memory_order_acquire))
    for (Rec& r : c->recs)
      if (r.tid.load(std::memory_order_relaxed) == 0) return &r;
  auto* c = static_cast<Chunk*>(calloc(1, sizeof(Chunk)));  // never freed (see the top)
  if (!c) return nullptr;
  c->next.store(g_chunks.load(std::memory_order_relaxed), std::memory_order_relaxed);
  g_chunks.store(c, std::memory_order_release);
  return &c->recs[0];
}

// Arms r's timer to expire `delay` ns from mono `now`. Signal-safe (timer_settime is a plain
// system call).
void arm_at(Rec* r, uint64_t now, uint64_t delay, uint64_t cpu) {
  const uint64_t at = now + delay;
  r->expiry.store(at, std::memory_order_relaxed);
  r->armed_cpu.store(cpu, std::memory_order_relaxed);
  const itimerspec its{timespec{0, 0}, to_ts(at)};
  timer_settime(r->timer, TIMER_ABSTIME, &its, nullptr);
}

// A delay uniform in [P/2, 3P/2) from r's generator. Signal-safe.
uint64_t jittered(Rec* r, uint64_t p) {
  const uint64_t x = util::xorshift_next(r->rng.load(std::memory_order_relaxed));
  r->rng.store(x, std::memory_order_relaxed);
  return p / 2 + (p ? x % p : 0);
}

// Parks r (its timer is not re-armed): its wake timer fires once the thread has run for a
// quarter period of CPU more. Signal-safe.
void park(Rec* r, uint64_t p) {
  r->parked.store(1, std::memory_order_release);
  const uint64_t q = p / 4 > 0 ? p / 4 : 1;
  const itimerspec its{timespec{0, 0}, to_ts(q)};
  timer_settime(r->wake, 0, &its, nullptr);  // relative: CPU time from now
}

int start(const ClockRequest& c) {
  g_sampler_interval.store(c.interval_ns, std::memory_order_relaxed);
  return timers_split_start(c);
}

void stop() {
  g_sampler_interval.store(0, std::memory_order_relaxed);
  timers_split_stop();
}

int arm_thread(Slot* s, const ClockRequest& c) {
  if (s->rec) return 0;
  Rec* r = alloc_rec();
  if (!r) return ENOMEM;
  r->cid = thread_cpu_clock(s->tid);
  const uint64_t now = util::clock_ns(r->cid);
  if (now == 0) return ESRCH;
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = g_signo;
  sev.sigev_value.sival_ptr = r;
  sev._sigev_un._tid = s->tid;
  if (real_timer_create(CLOCK_MONOTONIC, &sev, &r->timer) != 0) return errno;
  sev.sigev_value.sival_ptr = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(r) | kWakeTag);
  r->has_wake = real_timer_create(r->cid, &sev, &r->wake) == 0;
  // A random phase, as the cpu clock's first period: the first period ends `first`, uniform in
  // (0, P], of CPU time from now, so a thread that runs for c < P is credited one period with
  // probability c/P and short threads keep their expected share. Its first expiry comes when a
  // thread that runs all along reaches that end. (Before, the phase was taken back from the
  // thread's CPU time at its start, a few microseconds, so a new thread's first period was a
  // whole one, and the expiry was drawn apart from it: a thread of half a period was credited
  // about 4% of its time, tests/harm `Signals.ShortThreadsKeepTheirShareUnderTheSampler`.)
  const uint64_t first = random_phase(c.interval_ns);
  r->period_end.store(now + first, std::memory_order_relaxed);
  r->late_run.store(0, std::memory_order_relaxed);
  r->idle_run.store(0, std::memory_order_relaxed);
  r->parked.store(0, std::memory_order_relaxed);
  r->rng.store(random_phase(~uint64_t{0} >> 2) | 1u, std::memory_order_relaxed);
  r->tid.store(s->tid, std::memory_order_release);
  arm_at(r, mono_ns(), first, now);
  s->rec = r;
  return 0;
}

void after_fork_child(const ClockRequest& c) {
  // Only the forking thread lives, and no POSIX timer was inherited: every record is free
  // (its slot is armed anew).
  for (Chunk* ch = g_chunks.load(std::memory_order_acquire); ch;
       ch = ch->next.load(std::memory_order_acquire))
    for (Rec& r : ch->recs) r.tid.store(0, std::memory_order_relaxed);
  timers_split_after_fork(c);
}

// The whole periods of r's thread's CPU time that ended by `now`, uncredited; 0 if none. A
// period that ends within the slack after `now` counts: the thread's clock read at its expiry
// may fall a few microseconds short of the mono time armed for (the first expiry is its first
// period's end for a thread that ran all along, arm_thread; a VM's steal time is not the
// thread's). Credited early by that much, it is not lost. Signal-safe.
uint64_t ended_periods(const Rec* r, uint64_t now, uint64_t p) {
  const uint64_t end = r->period_end.load(std::memory_order_relaxed);
  const uint64_t slack = p / kSlackDiv;
  return now + slack < end ? 0 : 1 + (now + slack - end) / p;
}

// Marks w periods of r's thread credited (only its own thread does: the handler, or its end
// with every signal blocked). Signal-safe.
void credit(Rec* r, uint64_t w, uint64_t p) {
  r->period_end.store(r->period_end.load(std::memory_order_relaxed) + w * p,
                      std::memory_order_relaxed);
}

// On the thread itself at its end (its key destructor, or the process's stop on the main thread;
// under g_mu with every signal blocked): the whole periods of its CPU time that ended since its
// last credited sample. An expiry comes a jittered instant after the sample before it, and a
// thread that ends first had them credited nowhere: threads of 1.5 ms at 1 kHz had 76% of their
// CPU time, of 5 ms 87%. Credited at the thread's start routine (the program's entry point for
// the main thread), as the perf clock does at an event's close (perf.cpp, credit_at_close) and
// the record parent in drain mode.
void credit_at_end(Rec* r) {
  const uint64_t p = g_sampler_interval.load(std::memory_order_relaxed);
  if (p == 0) return;
  const uint64_t now = util::clock_ns(CLOCK_THREAD_CPUTIME_ID);
  const uint64_t w = now != 0 ? ended_periods(r, now, p) : 0;
  if (w == 0) return;
  credit(r, w, p);
  uintptr_t pc = perf::thread_start();
  if (pc == 0 && gettid_() == getpid()) pc = static_cast<uintptr_t>(getauxval(AT_ENTRY));
  if (pc == 0) return;
  const uint64_t system_w = engine::global().wants_system() ? timers_system_part(w) : 0;
  engine::global().sample(pc, w, system_w);
}

// Frees the thread's record and its timer.
void disarm(Slot* s) {
  if (!s->rec) return;
  auto* r = static_cast<Rec*>(s->rec);
  if (s->tid == gettid_()) credit_at_end(r);
  timer_delete(r->timer);
  if (r->has_wake) timer_delete(r->wake);
  r->tid.store(0, std::memory_order_release);
  s->rec = nullptr;
}

// A SI_TIMER signal of a live record of the pool (never freed: a late signal reads no freed
// memory), weighted by the whole periods of the thread's CPU time that ended since its last
// credited sample.
uint64_t weight(const siginfo_t* si, uint64_t* system_w) {
  if (si->si_code != SI_TIMER) return 0;
  const uint64_t p = g_sampler_interval.load(std::memory_order_relaxed);
  if (p == 0) return 0;
  const auto tagged = reinterpret_cast<uintptr_t>(si->si_value.sival_ptr);
  const bool wake = tagged & kWakeTag;
  auto* r = reinterpret_cast<Rec*>(tagged & ~kWakeTag);
  if (!in_pool(r) || r->tid.load(std::memory_order_acquire) == 0) return 0;
  const uint64_t now = util::clock_ns(CLOCK_THREAD_CPUTIME_ID);
  if (now == 0) return 0;
  const uint64_t mono = mono_ns();
  if (wake) {  // a parked thread ran again: its timer again, at a jittered instant from now
    uint32_t one = 1;
    if (r->parked.compare_exchange_strong(one, 0, std::memory_order_acq_rel))
      arm_at(r, mono, jittered(r, p), now);
    return 0;
  }
  const bool late = mono - r->expiry.load(std::memory_order_relaxed) > kLateNs;
  // Idle: it ran for under a quarter period since its timer was armed, twice in a row (once
  // is also a thread preempted just after its timer was armed: parking those put their time
  // on tick-locked samples, 3 points of skew). Parked: its wake timer re-arms it when it has
  // run again (a thread without one is never parked).
  const bool idle = r->has_wake && now - r->armed_cpu.load(std::memory_order_relaxed) < p / 4;
  if (!idle) {
    r->idle_run.store(0, std::memory_order_relaxed);
    arm_at(r, mono, jittered(r, p), now);
  } else if (r->idle_run.fetch_add(1, std::memory_order_relaxed) + 1 >= kIdleRuns) {
    r->idle_run.store(0, std::memory_order_relaxed);
    park(r, p);
  } else {
    arm_at(r, mono, jittered(r, p), now);
  }
  const uint64_t w = ended_periods(r, now, p);
  if (w == 0) return 0;  // no whole period yet: the next sample gets it
  // Late: the pc is where the scheduler stopped the thread; its time goes to the next prompt
  // sample (unless this happens again and again).
  if (late && r->late_run.fetch_add(1, std::memory_order_relaxed) + 1 < kMaxLateRun) return 0;
  r->late_run.store(0, std::memory_order_relaxed);
  credit(r, w, p);
  *system_w = engine::global().wants_system() ? timers_system_part(w) : 0;
  return w;
}

}  // namespace

constinit std::atomic<uint64_t> g_sampler_interval{0};

extern constinit const ClockOps g_clock_SAMPLER = {
    /*sigprof_only=*/false,
    /*process_wide=*/false,
    /*splits_system=*/true,
    /*prepare=*/nullptr,
    /*signalless=*/nullptr,  start,
    /*arm_process=*/nullptr, arm_thread, disarm, weight, stop, after_fork_child,
};

}  // namespace sprofil::rt
