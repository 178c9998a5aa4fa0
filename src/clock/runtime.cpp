// The runtime: which clock runs, on which signal, for which sessions; starting, stopping and
// switching it. The parts live in their own files:
//   handler.cpp       the signal handler (its async-signal-safety audit), weights, signal choice
//   clock.hpp         the clock interface (ClockOps), one file per clock: cpu.cpp, wall.cpp,
//                     itimer.cpp, perf_clock.cpp, sampler.cpp (timer.cpp: the POSIX timers of
//                     the cpu and wall clocks; perf.cpp: perf events)
//   threads.cpp       the thread registry and the pthread_create interposer
//   fork.cpp          the clock across fork
//   exec.cpp          the clock around exec (the interposed exec family)
//   program_view.cpp  the program's view of its signals and interval timers
// Everything here runs under g_mu with every signal blocked (Lock, clock.hpp).
#include "clock/runtime.hpp"

#include <pthread.h>
#include <signal.h>
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

#include "clock/clock.hpp"
#include "clock/perf.hpp"
#include "format/sprof_format.h"
#include "util/message.hpp"
#include "util/mutex.hpp"
#include "util/xorshift.hpp"

namespace sprofil::rt {

// The clocks, by kind: one row of SPROF_CLOCKS each, defined in the clock's own file. The
// runtime's ClockKind keeps the on-disk ids.
#define SPROFIL_CLOCK_DECL_(NAME, id, name, description, off_cpu) \
  extern const ClockOps g_clock_##NAME;
SPROF_CLOCKS(SPROFIL_CLOCK_DECL_)
#undef SPROFIL_CLOCK_DECL_
static_assert(static_cast<int>(ClockKind::kCpu) == SPROF_CLOCK_CPU);
static_assert(static_cast<int>(ClockKind::kItimer) == SPROF_CLOCK_ITIMER);
static_assert(static_cast<int>(ClockKind::kPerf) == SPROF_CLOCK_PERF);
static_assert(static_cast<int>(ClockKind::kWall) == SPROF_CLOCK_WALL);
static_assert(static_cast<int>(ClockKind::kSampler) == SPROF_CLOCK_SAMPLER);
static_assert(static_cast<int>(ClockKind::kAuto) == SPROF_CLOCK_COUNT);

namespace {
#define SPROFIL_CLOCK_ROW_(NAME, id, name, description, off_cpu) &g_clock_##NAME,
const ClockOps* const g_clocks[] = {SPROF_CLOCKS(SPROFIL_CLOCK_ROW_)};
#undef SPROFIL_CLOCK_ROW_
#define SPROFIL_CLOCK_NAME_(NAME, id, name, description, off_cpu) name,
const char* const g_clock_names[] = {SPROF_CLOCKS(SPROFIL_CLOCK_NAME_) "auto"};
#undef SPROFIL_CLOCK_NAME_
}  // namespace

const ClockOps& clock_ops(ClockKind k) {
  const auto i = static_cast<unsigned>(k);
  return *g_clocks[i < SPROF_CLOCK_COUNT ? i : 0];
}

extern const char g_cookie = 0;

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
// All of the following are guarded by g_mu.
bool g_active = false;  // a clock is running
ClockRequest g_clock;
int g_signo = 0;
struct sigaction g_prev_action;  // the program's view of g_signo: what it set, or had
uint64_t g_claimed = 0;          // bit s-1: the program put its own handler (or SIG_IGN) on s
pid_t g_pid = 0;

bool g_itimer_taken = false;
Hooks g_hooks;

namespace {
// The kind of the clock last started, readable without the runtime mutex (last_clock_kind()).
std::atomic<uint8_t> g_clock_kind_now{0};
std::atomic<int> g_signo_now{0};  // g_signo, for the lock-free interposers
uint64_t g_rng_state = 0;
}  // namespace

// One line on stderr (unless SPROFIL_QUIET, or the agent's silent hook): sprofil moved out of
// the program's way or stopped.
void note(const char* fmt, ...) {
  if (secure_getenv("SPROFIL_QUIET") || (g_hooks.silent && g_hooks.silent())) return;
  char line[320];
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > 0) util::message(line, static_cast<size_t>(n) < sizeof line ? n : sizeof line - 1);
}

pid_t gettid_() {
  return static_cast<pid_t>(syscall(SYS_gettid));
}

timespec to_ts(uint64_t ns) {
  return timespec{static_cast<time_t>(ns / 1000000000u), static_cast<long>(ns % 1000000000u)};
}

void reseed_after_fork() {
  g_rng_state = 0;
}

// Uniform in (0, period].
uint64_t random_phase(uint64_t period) {
  if (g_rng_state == 0) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    g_rng_state =
        (static_cast<uint64_t>(ts.tv_nsec) ^ (static_cast<uint64_t>(getpid()) << 32)) | 1u;
  }
  const uint64_t x = util::xorshift(&g_rng_state);
  return period ? 1 + (x >> 11) % period : 1;
}

BlockAll::BlockAll() {
  sigset_t all;
  sigfillset(&all);
  real_sigmask(SIG_BLOCK, &all, &saved);
}
BlockAll::~BlockAll() {
  real_sigmask(SIG_SETMASK, &saved, nullptr);
}

int arm_one(Slot* s) {
  const ClockOps& ops = clock_ops(g_clock.kind);
  return ops.process_wide ? 0 : ops.arm_thread(s, g_clock);
}

namespace {

// Disarms every thread, then the clock's process-wide part.
void disarm_all() {
  for (int i = 0; i < g_nslots; ++i) disarm_thread(&g_slots[i]);
  if (const auto stop = clock_ops(g_clock.kind).stop) stop();
}

}  // namespace

int arm_all() {
  const ClockOps& ops = clock_ops(g_clock.kind);
  if (ops.process_wide) return ops.arm_process(g_clock);
  const pid_t self = gettid_();
  for (int i = 0; i < g_nslots;) {
    const int e = ops.arm_thread(&g_slots[i], g_clock);
    if (e != 0 && g_slots[i].tid == self) return e;
    if (e != 0) {
      remove_slot(&g_slots[i]);
      continue;
    }
    ++i;
  }
  return 0;
}

int start_clock(const ClockRequest& req) {
  const ClockRequest c = resolve_auto(req);
  if (c.interval_ns == 0 || c.interval_ns > 1000000000ull * 3600) return EINVAL;
  const ClockOps& ops = clock_ops(c.kind);
  if (ops.prepare)
    if (int e = ops.prepare(c)) return e;
  int err = 0;
  // A clock whose samples need no signal (perf's drain mode: the record parent reads them)
  // takes none, so a program with handlers on every signal (Go) is sampled too.
  const bool signalless = ops.signalless && ops.signalless();
  const int signo = signalless ? 0 : choose_signal(ops, &err);
  if (!signo && !signalless) return err;
  if (signo)
    if (int e = install_handler(signo)) return e;
  if (ops.start) {
    if (int e = ops.start(c)) {
      if (signo) restore_handler(signo);
      return e;
    }
  }
  g_signo = signo;
  g_signo_now.store(signo, std::memory_order_release);
  g_clock = c;
  g_clock_kind_now.store(static_cast<uint8_t>(c.kind), std::memory_order_relaxed);
  g_active = true;
  scan_threads();
  add_slot(gettid_());
  if (int e = arm_all()) {
    disarm_all();
    if (signo) restore_handler(signo);
    g_active = false;
    g_signo = 0;
    g_signo_now.store(0, std::memory_order_release);
    return e;
  }
  return 0;
}

void stop_clock() {
  if (!g_active) return;
  disarm_all();
  g_signo_now.store(0, std::memory_order_release);
  if (g_signo) restore_handler(g_signo);
  g_active = false;
  g_signo = 0;
}

namespace {

bool same_clock(const ClockRequest& a, const ClockRequest& b) {
  // A running clock is resolved: kAuto matches whatever it resolved to.
  return (a.kind == b.kind || a.kind == ClockKind::kAuto) && a.interval_ns == b.interval_ns;
}

// In runtime.cpp, which every user of the runtime links (a static library pulls in only the
// objects whose symbols are used).
__attribute__((constructor(101))) void runtime_init() {
  g_pid = getpid();
  threads_init();
  install_fork_handlers();
}

}  // namespace

int install(engine::Channel ch, engine::Table* table, const ClockRequest& clock,
            engine::Table** old) {
  Lock lock;
  *old = nullptr;
  // Under the program's seccomp filter no clock starts (its system calls may be denied).
  if (table && sandboxed()) return EPERM;
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

void credit_at_underscore_exit() {
  if (sandboxed() || getpid() != g_pid) return;  // a vfork child: the registry is its parent's
  const BlockAll blocked;  // no signal of ours between the credit and the exit
  if (pthread_mutex_trylock(&g_mu) != 0) return;
  if (g_active && g_signo != 0 && g_clock.kind == ClockKind::kPerf)
    if (Slot* s = find_slot(gettid_()); s && s->event) perf::credit_own_at_exit(s->event);
  pthread_mutex_unlock(&g_mu);
}

int current_signal() {
  return g_signo_now.load(std::memory_order_acquire);
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
  for (unsigned i = 0; i <= SPROF_CLOCK_COUNT; ++i) {
    if (strcmp(name, g_clock_names[i]) == 0) {
      *out = static_cast<ClockKind>(i);
      return true;
    }
  }
  return false;
}

const char* clock_name(ClockKind k) {
  const auto i = static_cast<unsigned>(k);
  return i <= SPROF_CLOCK_COUNT ? g_clock_names[i] : "?";
}

bool clock_splits_system(ClockKind k) {
  return k != ClockKind::kAuto && clock_ops(k).splits_system;
}

const char* auto_fallback_reason() {
  Lock lock;
  return auto_reason();
}

void set_hooks(const Hooks& hooks) {
  Lock lock;
  g_hooks = hooks;
}

namespace {
ProcessHooks g_process_hooks[kMaxProcessHooks];  // add_process_hooks (g_mu)
}  // namespace

void add_process_hooks(const ProcessHooks& h) {
  Lock lock;
  for (auto& slot : g_process_hooks) {
    if (slot.sandboxed == h.sandboxed && slot.pause == h.pause && slot.resume == h.resume) return;
    if (!slot.sandboxed && !slot.pause && !slot.resume) {
      slot = h;
      return;
    }
  }
}

void process_hooks(ProcessHooks out[kMaxProcessHooks]) {
  Lock lock;
  for (int i = 0; i < kMaxProcessHooks; ++i) out[i] = g_process_hooks[i];
}

int signal_number() {
  Lock lock;
  return g_signo;
}

int armed_threads() {
  Lock lock;
  if (!g_active) return 0;
  if (clock_ops(g_clock.kind).process_wide) return 1;
  int n = 0;
  for (int i = 0; i < g_nslots; ++i) n += g_slots[i].has_timer || g_slots[i].event;
  return n;
}

}  // namespace sprofil::rt
