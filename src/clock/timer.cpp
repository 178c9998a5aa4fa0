// POSIX timers (timer_create with SIGEV_THREAD_ID), shared by the cpu and wall clocks and by
// perf-clock threads that get no event: arming one thread, the weight of an SI_TIMER signal
// and its kernel part.
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "clock/clock.hpp"
#include "engine/engine.hpp"

namespace sprofil::rt {
namespace {

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

}  // namespace

uint64_t timers_system_part(uint64_t w) {
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

int timers_split_start(const ClockRequest& c) {
  g_split_gen.fetch_add(1, std::memory_order_release);
  g_split_interval.store(c.interval_ns, std::memory_order_relaxed);
  return 0;
}

void timers_split_stop() {
  g_split_interval.store(0, std::memory_order_relaxed);
}

void timers_split_after_fork(const ClockRequest&) {
  g_split_gen.fetch_add(1, std::memory_order_release);  // our TLS holds the parent's stime
}

uint64_t timer_weight(const siginfo_t* si, uint64_t* system_w) {
  if (si->si_code != SI_TIMER || si->si_value.sival_ptr != &g_cookie) return 0;
  // Each overrun is an expiry the kernel folded into this signal (its tick is coarser than
  // our interval): weighting by them keeps count x interval equal to the time.
  const uint64_t w = 1 + static_cast<uint64_t>(si->si_overrun > 0 ? si->si_overrun : 0);
  // The system call only where a table keeps system parts (the agent's; not the faces').
  *system_w = engine::global().wants_system() ? timers_system_part(w) : 0;
  return w;
}

void disarm_timer(Slot* s) {
  if (!s->has_timer) return;
  timer_delete(s->timer);
  s->has_timer = false;
}

clockid_t thread_cpu_clock(pid_t tid) {
  return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 4u /*per-thread*/ |
                                2u /*sched*/);
}

int arm_posix_timer(Slot* s, clockid_t cid, int signo, uint64_t interval_ns) {
  if (s->has_timer) return 0;
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = signo;
  sev.sigev_value.sival_ptr = const_cast<char*>(&g_cookie);
  sev._sigev_un._tid = s->tid;
  if (real_timer_create(cid, &sev, &s->timer) != 0) return errno;
  // The first period has a random phase, uniform in (0, P]: a thread that runs for c < P
  // then gets one sample with probability c/P, so short threads keep their expected share.
  const itimerspec its{to_ts(interval_ns), to_ts(random_phase(interval_ns))};
  if (timer_settime(s->timer, 0, &its, nullptr) != 0) {
    const int e = errno;
    timer_delete(s->timer);
    return e;
  }
  s->has_timer = true;
  return 0;
}

}  // namespace sprofil::rt
