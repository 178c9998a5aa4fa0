// The perf clock: one user-space task-clock perf event per thread (the mechanics are in
// perf.cpp), and kAuto's resolution: perf where perf_event_open works, else the sampler clock
// (sampler.cpp: on a loaded machine the cpu clock's tick-bound timers skew attribution).
// Samples carry their kernel part (perf::credit).
#include <sys/auxv.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "clock/clock.hpp"
#include "clock/perf.hpp"

namespace sprofil::rt {
namespace {

bool g_perf_ring = false;        // ring buffers instead of a signal per sample (g_mu)
bool g_perf_drain = false;       // events handed to the record parent (g_mu)
bool g_jitter_on = true;         // (g_mu)
bool g_drain_only = false;       // perf::set_drain_only (g_mu)
const char* g_auto_reason = "";  // why kAuto fell back to kSampler (g_mu)
char g_auto_reason_buf[160];
// resolve_auto() probed perf at this period for the start_clock() that now prepares it: the
// same probe again would cost a perf_event_open and a close of every process image's start
// (about 50 us of a short process's CPU here). (g_mu)
uint64_t g_auto_probed_ns = 0;

int prepare(const ClockRequest& c) {
  const bool probed = std::exchange(g_auto_probed_ns, 0) == c.interval_ns;
  if (!probed)
    if (int e = perf::probe(c.interval_ns)) return e;
  // Drain mode wherever a record parent listens (SPROFIL_DRAIN), unless another mode is
  // asked for; signal mode otherwise (plain LD_PRELOAD, the faces, the API).
  const char* mode = secure_getenv("SPROFIL_PERF_MODE");
  g_perf_ring = mode && strcmp(mode, "ring") == 0;
  g_perf_drain = perf::drain_asked() && perf::drain_configure();
  if (g_drain_only && !g_perf_drain) return ENOTCONN;
  perf::new_generation(c.interval_ns);
  g_jitter_on = perf::jitter_asked();
  perf::set_jitter(g_jitter_on);
  return 0;
}

int start(const ClockRequest&) {
  return g_perf_ring ? perf::start_drainer() : 0;
}

int arm_thread(Slot* s, const ClockRequest& c) {
  if (s->has_timer || s->event) return 0;
  auto* ev = static_cast<perf::Event*>(malloc(sizeof(perf::Event)));
  if (!ev) return ENOMEM;
  const uint64_t first = random_phase(c.interval_ns);
  if (g_perf_drain) {
    // The pc of the thread's kernel time if it never has a user-space sample: its start
    // routine; the main thread's is the program's entry point. Without it, the periods of a
    // short process whose every period ended in the kernel (fork, exec, exit, page faults)
    // were counted nowhere: measured on a shell loop of seq | sort | head and python3, 76 ms
    // of 1.02 s CPU (7%), mostly the shell's own fork and wait time.
    uintptr_t start = s->tid == gettid_() ? perf::thread_start() : 0;
    if (start == 0 && s->tid == getpid()) start = static_cast<uintptr_t>(getauxval(AT_ENTRY));
    // The main thread's event may have gone with the image's file already (take_early).
    const int e = perf::take_early(s->tid, c.interval_ns)
                      ? 0
                      : perf::open_drained(s->tid, c.interval_ns, first, g_jitter_on, start);
    if (e == 0) {
      *ev = perf::Event{};  // fd -1: the record parent holds the event
      s->event = ev;
      return 0;
    }
    perf::kept_at_exec();  // sampled another way, or not at all: its exec stops the clock
    static bool said = false;
    if (!said)
      note("sprofil: cannot hand a thread's perf event to sprofil record (%s)%s\n", strerror(e),
           g_signo ? "; using a signal per sample" : ": that thread is not sampled");
    said = true;
    if (!g_signo) {  // drain mode took no signal: nothing else can sample this thread
      free(ev);
      return e;
    }
  }
  if (int e = perf::open_event(s->tid, c.interval_ns, first, g_signo, g_perf_ring, ev)) {
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
      return arm_posix_timer(s, thread_cpu_clock(s->tid), g_signo, c.interval_ns);
    }
    return e;
  }
  s->event = ev;
  return 0;
}

// Its event, or the CPU-time timer of a thread that got none.
void disarm(Slot* s) {
  if (s->event) {
    perf::close_event(s->event);
    free(s->event);
    s->event = nullptr;
  }
  disarm_timer(s);
}

// An overflow of one of our events (F_SETSIG: POLL_IN, or POLL_HUP at its end), or a timer
// of a thread that got no event.
uint64_t weight(const siginfo_t* si, uint64_t* system_w) {
  if (si->si_code == SI_TIMER) return timer_weight(si, system_w);
  if (si->si_code != POLL_IN && si->si_code != POLL_HUP) return 0;
  return perf::is_ours(si->si_fd) ? perf::signal_weight(si->si_fd, system_w) : 0;
}

void stop() {
  perf::stop_drainer();
  // Every event of this process is drained into the file before the agent completes it.
  if (g_perf_drain) perf::flush_drained();
}

void after_fork_child(const ClockRequest& c) {
  perf::new_generation(c.interval_ns);  // our TLS holds the parent's thread's state
  if (g_perf_ring) perf::start_drainer();
}

// Drain mode only: a signal per sample, or a ring this process drains, stops first.
bool ends_at_exec() {
  return g_perf_drain && !g_perf_ring && perf::exec_removes_events();
}

}  // namespace

bool perf::drain_mode() {
  return g_perf_drain;
}

void perf::set_drain_only(bool only) {
  g_drain_only = only;
}

extern constinit const ClockOps g_clock_PERF = {
    /*sigprof_only=*/false,
    /*process_wide=*/false,
    /*splits_system=*/true,  prepare,      perf::drain_mode, start,
    /*arm_process=*/nullptr, arm_thread,   disarm,           weight, stop,
    after_fork_child,        ends_at_exec,
};

ClockRequest resolve_auto(const ClockRequest& c) {
  if (c.kind != ClockKind::kAuto) return c;
  ClockRequest r = c;
  // A main-thread event handed over with the image's file shows that perf works here.
  const int e = perf::early_handed(c.interval_ns) ? 0 : perf::probe(c.interval_ns);
  g_auto_probed_ns = e == 0 ? c.interval_ns : 0;
  if (e == 0) {
    g_auto_reason = "";
    r.kind = ClockKind::kPerf;
  } else {
    snprintf(g_auto_reason_buf, sizeof g_auto_reason_buf,
             "perf_event_open failed (%s%s); using the sampler clock", strerror(e),
             e == EACCES || e == EPERM ? ": see /proc/sys/kernel/perf_event_paranoid" : "");
    g_auto_reason = g_auto_reason_buf;
    r.kind = ClockKind::kSampler;
  }
  return r;
}

const char* auto_reason() {
  return g_auto_reason;
}

}  // namespace sprofil::rt
