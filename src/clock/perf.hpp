// The perf_event clock: one user-space task-clock sampling event per thread. Two ways to get
// the pc out of the kernel, measured in docs/benchmarks.md:
// - signal (default): every overflow sends the profiling signal to the sampled thread itself
//   (F_SETSIG + F_SETOWN_EX), and the handler reads the pc from its ucontext. Nothing is ever
//   buffered, so a crash or SIGKILL loses no sample.
// - ring: the kernel writes PERF_RECORD_SAMPLE records (the ip) into a per-thread ring buffer
//   that a background thread drains every few milliseconds. Cheaper for the profiled thread,
//   but the last milliseconds before an abrupt end are lost.
// - drain (the default under `sprofil record`, drain_client.cpp): the agent opens and
//   enables each thread's event, then hands it to the record parent over a Unix socket
//   (format/drain_proto.hpp) and closes it: the parent maps its ring, drains, jitters and
//   counts.
// Locking: called with the runtime mutex held, except is_ours() (signal-safe) and the drainer
// thread, which takes only the ring mutex.
#pragma once

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "util/xorshift.hpp"

namespace sprofil::rt::perf {

// Against lockstep with periodic code, each event's period is re-drawn in [4P/5, 4P/3]
// (jittered_period: its rate uniform in [3/(4P), 5/(4P)]; PERF_EVENT_IOC_PERIOD, which
// restarts the period) after a block of kJitterBlock / 2 to 3 * kJitterBlock / 2 of its
// samples times block_scale() (below), drawn anew for each block: the phase against a periodic
// workload is random from one block to the next (tests/clock's aliasing test), and the weights come
// from the counter, so the restarts leave count x P unbiased. One schedule for the signal handler
// (perf.cpp) and the record parent (drain.cpp). Without jitter a workload in step with the period
// got 1460:0 samples instead of about 1:1; a re-draw costs an ioctl and ends a partial period
// (docs/benchmarks.md, cmp-perf-signal-floor). Within a block the sampling instants drift
// against a workload of period about P by up to a third of a period per sample, and across a
// block of 16 by up to 5 P, so the next block's phase is about uniform. Measured on the 2-core
// VM of docs/benchmarks.md, signal mode at 10 kHz, where one overflow costs about 50 us (the
// timer's exits, signal delivery), with periods drawn uniformly then:
// - from [P/2, 3P/2]: a period of 50 us is no longer than that cost, the next overflow fell in
//   the kernel and was dropped: 9.5% fewer signals per CPU-second than the empty-handler
//   floor; from [3P/4, 5P/4] 4.5% fewer (the rest was the restart, see perf.cpp's jitter());
// - blocks of 8 to 24 samples: 1.08x the floor (three runs: 1.08, 1.08, 1.27); 16 to 48:
//   1.03, 1.04, 1.11 (the same run's no-jitter row 1.12); 16 to 48 scaled (block_scale): see
//   docs/benchmarks.md.
constexpr uint64_t kJitterBlock = 32;

// Blocks are block_scale() times that long: at least kBlockNs of the thread's task clock at
// their shortest (16 periods), and at least kMinBlockScale times 16 periods, in the signal
// handler and in the record parent alike (jitter_block below: one schedule). A re-draw is the
// handler's own ioctl in signal mode (a restart of the hrtimer, a timer exit on a VM) and from
// the parent it interrupts the thread's CPU (the ioctl runs there by IPI, about 70 us of the
// thread's time on the AMD EPYC VM): cmp-burn4 at 10 kHz took 1.775 s of CPU with the
// parent's re-draws every 16-48 records against 1.734 s without jitter and 1.759 s under perf
// record (12 rounds interleaved). Within a block of n samples the instants drift against a
// workload of period about P by up to n/4 periods, so longer blocks still leave the phase
// about uniform (tests/clock's Alias and AliasDefault). But a block runs at one period: a
// short run is few blocks, and if one block's period falls near a multiple of the workload's,
// that block's samples pile onto one phase. Blocks of 160 to 480 ms (about 3 re-draws a second
// instead of 10, 1 ms of cmp-burn4's CPU a second less at 1 kHz) made a 0.4 s run of
// tests/report's diff_prog, three functions in 2 ms rounds, give one of them 18% instead of
// 33% (Diff.SameProgramTwiceFlagsAlmostNothing), so blocks stay at 48 ms.
// A young thread, one with less than kYoungNs of task clock credited (`credited` periods of
// P: its samples and the periods credited without one, the same count in both modes), gets blocks
// of kYoungBlockNs instead (16 to 48 periods at 1 kHz): while a thread has few samples one
// block is a large part of them, and one that falls near a multiple of a periodic workload's
// period moves its shares by many points. A run of 0.4 s is 3 to 8 blocks of 48 ms, and 8 to
// 25 of 16 ms; the cost is about 10 more re-draws a thread, once.
// Signal mode used to re-draw after 16 to 48 samples at every rate: at 10 kHz an ioctl (and a
// read of the counter) every 3.2 ms on average, ten times as often as the record parent.
// The record parent draws each thread's first period when it takes the event (drain.cpp's
// add), while the thread waits off its CPU: no IPI, and no first block at an undrawn period.
constexpr uint64_t kMinBlockScale = 3;
constexpr uint64_t kBlockNs = 48000000;
constexpr uint64_t kYoungNs = 500000000;
constexpr uint64_t kYoungBlockNs = 16000000;
inline uint64_t block_scale(uint64_t period, uint64_t credited) {
  if (!period) return kMinBlockScale;
  const bool young = credited < kYoungNs / period;
  const uint64_t by_time = (young ? kYoungBlockNs : kBlockNs) / (period * (kJitterBlock / 2));
  const uint64_t least = young ? 1 : kMinBlockScale;
  return by_time > least ? by_time : least;
}

// The length, in samples, of a thread's next block, at the nominal period `period`, when
// `credited` periods have been credited to it so far (Credit::periods). Signal-safe.
inline uint64_t jitter_block(uint64_t* rng, uint64_t period, uint64_t credited) {
  return block_scale(period, credited) *
         (kJitterBlock / 2 + (util::xorshift(rng) >> 8) % (kJitterBlock + 1));
}

// The shortest period a task clock keeps: the kernel times a software clock event's periods
// with an hrtimer of at least 10 us (perf_swevent_start_hrtimer), while its samples report the
// period asked for. So no period is drawn below it (jittered_period), and `sprofil record`
// samples the perf clock at most 1e9 / kMinPeriodNs times a second (record.cpp): at -F 200000
// each sample stood for 5 us of a thread's time that the kernel had made 10 us and more, and
// the profile's CPU time was half the program's.
constexpr uint64_t kMinPeriodNs = 10000;

// A period of P / f, f drawn uniformly from [3/4, 5/4] in steps of 1/1024: the periods span
// [4P/5, 4P/3] and the rate is on average exactly the one asked, 1/P. (Periods drawn uniformly
// from [3P/4, 5P/4] average P, but their rate is 1/P times (2 ln (5/3)) = 1.022: 2.2% more
// overflows, each about 50 us of the thread's time at 10 kHz on the AMD EPYC VM of
// docs/benchmarks.md, than perf record's fixed period; the weights were unbiased either way.)
// Never below kMinPeriodNs (a period near it: the draws below it are raised to it). Signal-safe.
inline uint64_t jittered_period(uint64_t period, uint64_t* rng) {
  const uint64_t f = 768 + (util::xorshift(rng) >> 8) % 513;  // 1024 f
  const uint64_t next = period * 1024 / f;
  return next > kMinPeriodNs ? next : kMinPeriodNs;
}

// The kernel's first period for an event whose random first period (the phase, P - first,
// is added to its counter) was drawn as `first`: never shorter than kMinFirstNs (or P if
// that is less). A period shorter than one overflow's own cost (about 50 us
// on the AMD EPYC VM of docs/benchmarks.md) livelocks the thread: each overflow's handling
// runs into the next period, and the kernel throttles. And a first period persists past its
// overflow until it is set back to P: in signal mode at the thread's first user-space signal,
// in drain mode by the record parent after the hand-over (the agent's socket calls, all
// kernel time, whose overflows leave no record). Measured on a program that runs 100 short
// threads in turn under `sprofil record` at 1 kHz: the threads whose draw was a few
// microseconds took up to 340 ms each in their hand-over, the process 0.4-1.9 s of CPU in 7
// runs of 8 where perf record took 25 ms (tests/harm ThreadStartsDoNotLivelock...).
// The counter's phase still comes from `first`, so the weights and a short thread's expected
// share are as before; only the first sample's pc is taken later, at the floor. (A floor of
// P/4 at 1 kHz measured the same on tests/harm's short threads; 100 us moves fewer draws.)
// Signal-safe.
constexpr uint64_t kMinFirstNs = 100000;
inline uint64_t first_overflow(uint64_t period, uint64_t first) {
  const uint64_t floor = period < kMinFirstNs ? period : kMinFirstNs;
  return first < floor ? floor : first;
}

// What credit() takes as the user-space period that ended at an event's first overflow (its
// Credit::next_ns then): the phase added to the counter plus the kernel's first period, so
// that the counter (+ phase) at that overflow is all user time. Signal-safe.
inline uint64_t first_user_ns(uint64_t period, uint64_t phase) {
  return phase + first_overflow(period, period - phase);
}

// How far the counter `value` is into the period running now, whose overflows fall at `start`
// (the counter where the event's period was last set or an overflow was seen) plus whole
// periods of `len`; 0 when unknown. What a PERF_EVENT_IOC_PERIOD restart at `value` cuts
// short. Signal-safe.
inline uint64_t into_period(uint64_t value, uint64_t start, uint64_t len) {
  return value > start && len ? (value - start) % len : 0;
}

// Signal mode's read skip: the counter at the overflow signalled now, without read(2), when it
// can only be the one right after the last counted. A read is a system call, about 1.4 us on
// the AMD EPYC VM of docs/benchmarks.md against about 55 us per signal; in a thread that runs
// user code undisturbed most signals skip it.
// The counter counts the thread's CPU time, which never runs faster than the monotonic clock:
// at `now` it is at most the anchor's value plus the time since the anchor. The overflows
// fall at the anchor's overflow plus whole periods of `len`, the period running (a re-draw,
// or a thread's first signal, reads and re-anchors; the ioctl restarts the period a little
// after the read, so the true overflows fall a little later than these, never earlier). If
// that bound stays a margin (len / 8, for the two clocks' rates) short of the second overflow
// after the last counted, exactly one was passed since: this signal's, at the next grid point,
// whose counter is returned. credit() weighs it as it would the read: the counter between an
// overflow and its signal is the delivery's kernel time, less than a period, which the next
// read counts. Time the thread spent in the kernel or off its CPU since the anchor loosens the
// bound and the counter is read; so does every kMaxSkipped-th signal (tests/clock's
// ReadSkip). Signal-safe.
struct Anchor {
  uint64_t ns = 0;        // CLOCK_MONOTONIC_RAW just before the last read of the counter
  uint64_t value = 0;     // the value read
  uint64_t overflow = 0;  // the counter at the overflow that read followed
  uint64_t skipped = 0;   // overflows taken since without a read
};
constexpr uint64_t kMaxSkipped = 64;

// A read of `value` at `now` (taken before the read), with the period's overflows at
// `restart` plus whole periods of `len` (after any restart at this signal).
inline void anchor_at(Anchor* a, uint64_t now, uint64_t value, uint64_t restart, uint64_t len) {
  *a = Anchor{now, value, value - into_period(value, restart, len), 0};
}

inline bool overflow_without_read(Anchor* a, uint64_t len, uint64_t now, uint64_t* value) {
  if (a->ns == 0 || now < a->ns || a->skipped >= kMaxSkipped || len == 0) return false;
  const uint64_t bound = a->value + (now - a->ns);
  if (bound + len / 8 >= a->overflow + (a->skipped + 2) * len) return false;
  ++a->skipped;
  *value = a->overflow + a->skipped * len;
  return true;
}

// What one thread's event has been credited so far (see credit()).
struct Credit {
  uint64_t periods = 0;   // whole periods of task clock credited
  uint64_t user_ns = 0;   // task clock of the periods that ended in user space (one per overflow)
  uint64_t next_ns = 0;   // the length of the period running now, if not P (jitter sets it)
  uint64_t system = 0;    // of the credited periods, those credited as kernel time
  uint64_t stolen = 0;    // counter ns that were not the thread's CPU time (without_steal)
  uint64_t cpu_base = 0;  // the thread's CPU clock minus the counter (+ phase), at the first look
  bool based = false;     // cpu_base is set

  // The length of the period running now, for an event of nominal period P. Signal-safe.
  uint64_t running(uint64_t period) const { return next_ns ? next_ns : period; }
};

struct Event {
  int fd = -1;
  pid_t tid = 0;
  void* ring = nullptr;  // ring mode: the mmap'd buffer (meta page + data)
  size_t ring_bytes = 0;
  uint64_t period = 0;       // ns of task clock per sample
  uint64_t phase = 0;        // P minus the first period (random): added to the counter
  Credit credits;            // ring mode: what was credited so far (drainer only)
  bool period_set = false;   // ring mode: the period is back to P after the first record
  bool unthrottled = false;  // ring mode: the kernel resumed it after a throttle, no record since
};

// open_event's error when no fd can be kept out of the program's reach (see open_event):
// the caller gives that thread a CPU-time timer instead.
constexpr int kNoFdRoom = -1;

// The weight of one overflow: the whole periods of task clock that elapsed since the last
// one credited. Periods that ended while the thread was in the kernel raise no overflow of
// their own (the event counts user space only), yet they are CPU time: crediting them here
// keeps count x period equal to the thread's task clock, as the CPU-time timers' overruns
// do. An overflow that comes before a whole new period has elapsed (the period is jittered)
// weighs 0: its time is credited to the next one, so no excess can build up.
//
// The kernel part (*system_w, <= the weight): the task clock's hrtimer fires every period
// whether the thread is in user space or in the kernel, and perf_swevent_hrtimer() drops the
// overflow when perf_exclude_event() sees kernel-mode registers (exclude_kernel). So every
// overflow ends one period spent in user space, of the length in effect (P, or the jittered
// length set after the previous overflow: c->next_ns), and the rest of the task clock was
// spent in the kernel. Counted cumulatively in nanoseconds (task clock minus the user
// periods, in whole P, never less than what was already credited as kernel time), not as
// weight - 1 per overflow: a jittered period longer than P gives weight 2 in pure user code
// after a weight-0 overflow, and the cumulative count cancels the two. Counting each overflow
// as one P instead let the jittered periods' drift from P pass for kernel time, which went to
// whatever ran next; measured on tests/clock's page-fault program: user shares 8 points off
// perf's user-only samples with jitter, within 1 point with this. Periods the event counted while
// the kernel throttled it are not credited here: see drop_throttled(). Signal-safe.
inline uint64_t credit(uint64_t value, uint64_t period, Credit* c, uint64_t* system_w) {
  *system_w = 0;
  c->user_ns += c->running(period);
  const uint64_t elapsed = value / period;
  if (elapsed <= c->periods) return 0;
  const uint64_t w = elapsed - c->periods;
  c->periods = elapsed;
  const uint64_t kernel = value > c->user_ns ? (value - c->user_ns) / period : 0;
  if (kernel > c->system) {
    *system_w = kernel - c->system < w ? kernel - c->system : w;
    c->system += *system_w;
  }
  return w;
}

// The task clock runs on while the thread does not: perf's clock (local_clock) counts the
// time the host runs another virtual CPU in this one's stead (steal), which the thread's CPU
// clock (the scheduler's clock_task) leaves out, and so do getrusage and the kernel's CPU
// accounting. credit() would take such time for kernel time, in whole periods, at whatever
// pc the thread ran next: beside three busy loops, one drain-mode run of two loops of 1:2
// work had 2.28x its CPU time in samples, 55% of them "system", the first loop at 14%
// instead of 33% (bench/steal.sh; docs/benchmarks.md).
// So an overflow that would credit more than one period reads the thread's CPU clock: what
// the counter (+ phase) has run ahead of it, since the event was opened (base_at_open), by
// more than `slack` is steal, left out of this and every later credit. The slack covers how
// stale the CPU clock may be (a thread's own clock is exact; another process's thread's,
// from /proc, lags by up to a scheduler tick).

// The base: the thread's CPU clock when its event was opened (the counter at 0, so the
// counter + phase stood at `phase`). Without one (the clock could not be read) there is no
// steal check for that event.
inline void base_at_open(uint64_t cpu_at_open, uint64_t phase, Credit* c) {
  c->cpu_base = cpu_at_open > phase ? cpu_at_open - phase : 0;
  c->based = true;
}

// The value to credit for an overflow whose counter (+ phase) is `value`: less the steal.
// read_cpu() returns the thread's CPU clock now, 0 if it cannot be read; it is called only
// when the credit would exceed one period. Signal-safe if read_cpu is.
template <class ReadCpu>
uint64_t steal_free(uint64_t value, uint64_t period, uint64_t slack, Credit* c, ReadCpu read_cpu) {
  const uint64_t v = value - (c->stolen < value ? c->stolen : value);
  if (!c->based || v / period <= c->periods + 1) return v;
  const uint64_t cpu = read_cpu();
  if (cpu == 0) return v;
  const uint64_t budget = (cpu > c->cpu_base ? cpu - c->cpu_base : 0) + slack;
  if (v <= budget) return v;
  c->stolen += v - budget;
  return budget;
}

// n records the kernel dropped (PERF_RECORD_LOST: the ring was full): each was an overflow,
// one period that ended in user space, at a pc nobody will know. They are counted as lost
// samples by the caller; here their periods are taken off what the next record credits, which
// would otherwise take them for kernel time at its own pc.
inline void drop_lost(uint64_t n, uint64_t period_len, Credit* c) {
  c->periods += n;
  c->user_ns += n * period_len;
}

// The first record after the kernel resumed a throttled event (PERF_RECORD_UNTHROTTLE: it
// stops an event's samples till its next tick once it took perf_event_max_sample_rate / HZ in
// one): of the whole periods its counter (+ phase) `value` ran since the last credit, all but
// its own ended while the event took no samples, at pcs nobody saw. They are dropped as lost
// ones (drop_lost), returned for the caller to count: credit() would take them for kernel time
// at this record's pc, where the tick let the event go (record --agent, at 4 kHz under a limit
// of 1000, put burn_a at 62% of a run whose truth was 33%). Signal-safe.
// The gap's part of a period goes with them, not to kernel time: c->user_ns is raised so that
// credit() finds no new kernel time in this record (else each resume left up to a period
// there, and 56% of such a run's samples were "system").
inline uint64_t drop_throttled(uint64_t value, uint64_t period, uint64_t period_len, Credit* c) {
  const uint64_t elapsed = value / period;
  if (elapsed <= c->periods + 1) return 0;
  const uint64_t n = elapsed - c->periods - 1;
  drop_lost(n, period_len, c);
  const uint64_t kernel_ns = c->system * period + c->running(period);
  if (value > kernel_ns && value - kernel_ns > c->user_ns) c->user_ns = value - kernel_ns;
  return n;
}

// How an event's samples leave the kernel: a signal to its thread per overflow, a ring this
// process drains (ring mode), or a ring the record parent drains (drain mode).
enum class Delivery { kSignal, kRing, kDrain };

// Ring mode's data pages: 32 KiB, ~1300 records (ip + value), 0.13 s at 10 kHz.
constexpr size_t kRingDataPages = 8;

// The attributes of a thread's user-space task-clock event that overflows every period_ns of
// its CPU time (for a new event, first_overflow() of its drawn first period), and
// perf_event_open(2) of it on thread tid, close-on-exec.
// (Also the record parent's, for a process image's main thread: drain_proto.hpp's
// kNewOpenEvent.)
inline perf_event_attr make_attr(uint64_t period_ns, Delivery d) {
  perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_SOFTWARE;
  a.size = sizeof a;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = period_ns;  // the task clock counts nanoseconds
  a.exclude_kernel = 1;         // user space only: allowed at perf_event_paranoid 2
  a.exclude_hv = 1;
  a.disabled = 1;
  switch (d) {
    case Delivery::kSignal:
      a.wakeup_events = 1;
      break;
    case Delivery::kRing:
      a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_READ;  // the counter gives the weight
      a.watermark = 1;
      a.wakeup_watermark = static_cast<uint32_t>(kRingDataPages * 4096 / 2);
      break;
    case Delivery::kDrain:
      a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_READ;  // drain_proto.hpp's kDrainSampleType
      // Counting from the open: the hand-over takes tens of microseconds, a large part of a
      // short thread (tests/harm ShortThreadsKeepTheirShare: 0.87 of its CPU time when enabled
      // after the ring's mapping). A period that ends before the parent has mapped the ring
      // drops its record, not its time: the next sample's weight is the counter's delta.
      a.disabled = 0;
      // Ended by the kernel at an exec (Linux 5.13): its samples up to the exec are in the
      // ring, the parent sees its end (POLLHUP), and no event of the old image goes on
      // sampling the new one, even one exec'd behind the agent's back (a raw execve system
      // call). So a forked child without a file of its own makes no flush exchange at its
      // exec (drain_client.cpp, exec_removes_events).
      a.remove_on_exec = 1;
      break;
  }
  return a;
}

inline int sys_perf_event_open(perf_event_attr* a, pid_t tid) {
  return static_cast<int>(syscall(SYS_perf_event_open, a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

// perf_event_open of a drain-mode event (make_attr's kDrain) on tid, without remove_on_exec
// where the kernel refuses it (EINVAL before Linux 5.13); *at_exec: whether the exec removes
// the event opened.
inline int open_drain_event(perf_event_attr* a, pid_t tid, bool* at_exec) {
  int fd = sys_perf_event_open(a, tid);
  if (fd < 0 && errno == EINVAL && a->remove_on_exec) {
    a->remove_on_exec = 0;
    fd = sys_perf_event_open(a, tid);
  }
  *at_exec = fd >= 0 && a->remove_on_exec;
  return fd;
}

// Signal mode, in the handler: the weight of the overflow signalled on fd, from the event's
// counter (one read(2), async-signal-safe, unless overflow_without_read() shows it), and its
// kernel part in *system_w.
// Per-thread state in initial-exec TLS.
uint64_t signal_weight(int fd, uint64_t* system_w);

// Whether perf_event_open works here for a user-space task-clock event; 0 or the errno.
int probe(uint64_t period_ns);

// Opens and enables the event on thread tid, its first period `first_ns` (uniform in (0, P]:
// a thread shorter than a period still gets its expected share; the phase P - first is
// added to the counter so weights stay whole periods). The fd is kept out of the program's
// reach: above its RLIMIT_NOFILE soft limit when the hard limit leaves room (the soft limit
// is raised for the moment of one F_DUPFD), else in the top 256 of a budget of at least 1024;
// otherwise kNoFdRoom. Returns 0 or an errno value.
int open_event(pid_t tid, uint64_t period_ns, uint64_t first_ns, int signo, bool ring, Event* out);

// Moves fd out of the program's reach as open_event does (or closes it: kNoFdRoom), and
// whether there is such room at all under the current RLIMIT_NOFILE.
int place_out_of_reach(int fd);
bool fd_room();

// Disables and closes the event; in ring mode its last records are counted first.
void close_event(Event* e);

// Forgets an inherited event without touching the parent's (the child after fork).
void forget_event(Event* e);

// Signal mode, at an _exit (runtime.hpp, credit_at_underscore_exit): the calling thread's own
// event is closed as at its end (close_event: the whole periods since its last signal are
// credited). Signal-safe; every signal blocked in the caller.
void credit_own_at_exit(Event* e);

// True if fd is one of our signal-mode events. Signal-safe.
bool is_ours(int fd);

// Random jitter of the sampling period against lockstep with periodic code (default on;
// SPROFIL_JITTER=0 turns it off).
void set_jitter(bool on);

// Starts a new generation of events (called when the clock starts): forget per-thread state.
void new_generation(uint64_t period_ns);

// Starts / stops the thread that drains ring buffers. tid of the drainer, or 0.
int start_drainer();
void stop_drainer();
pid_t drainer_tid();

// In a forked child: the drainer thread and the ring list were the parent's.
void reset_after_fork();

// Drain mode (drain_client.cpp). The agent registers how to open a new fd of its profile
// file (sent with each event); drain_configure() reads SPROFIL_DRAIN and says whether drain
// mode can run. open_drained() opens and enables tid's event, hands it to the parent (which maps
// its ring) and closes it: 0, or an errno value (nothing is left open; the caller falls back to a
// signal-mode event). flush_drained() asks the parent to drain and close every event of
// this process, and waits for it (bounded): called when sampling stops. sync_drained() asks
// it to drain them (kDrainSync) and waits: called before regions are marked unloaded; a no-op
// outside drain mode. After release_at_flush() (the agent's exit), the flush also asks the
// parent to give back the file's reserved space that no sample wrote, once it has answered
// (kFlushRelease); released_by_parent() says whether a flush so asked was answered, so that
// the agent need not do it in the program's time. Where the parent made the process's file
// and watches its end (kDrainNewFile's FileAnswer::watched), the exit's flush sends nothing:
// the parent does all of that once the process has ended, and released_by_parent() is true.
void set_drain_file(int (*open_file)());
bool drain_configure();
int open_drained(pid_t tid, uint64_t period_ns, uint64_t first_ns, bool jitter, uintptr_t start_pc);

// The calling thread's start routine (set by the pthread_create trampoline), 0 if unknown:
// drain mode charges a thread's kernel time to it when the thread never had a user-space
// sample (its periods all ended in the kernel, e.g. a thread shorter than a period).
void set_thread_start(uintptr_t pc);
uintptr_t thread_start();
int flush_drained();
void release_at_flush();
bool released_by_parent();
int sync_drained();
// A forked child under drain mode (drain_proto.hpp's kAddPending, kDrainChildFile): where its
// own file is to be made, by the record parent. dirfd: an O_PATH fd of the run's directory.
struct DrainChild {
  int dirfd = -1;
  uint32_t region_count = 0;  // the records it has (the parent process's, as at the fork)
  uint64_t regions_end = 0;
  uint64_t start_ns = 0;  // the fork's time (CLOCK_REALTIME)
  int ppid = 0;
  const char* name = nullptr;  // the files' base name
  uint64_t from_dev = 0;       // the file of the process it was forked from
  uint64_t from_ino = 0;
};
// The agent registers whether this process is a forked child without its own file yet: with
// `out`, it fills it (with `dir`, opening out->dirfd, which the caller closes); events are
// then handed over pending (the parent makes the file at the first sample) and flushes carry
// the end fields (kFlushFinish).
void set_drain_child(bool (*pending)(DrainChild* out, bool dir));
// The child's own file from the record parent (kDrainChildFile): the one it made for the
// child's samples, or a new one made from `from` (the parent process's file), its first
// c.region_count records copied and their space reserved. The fd (close-on-exec) and *k (its
// name, profile_name.hpp), or -1: not in drain mode, or the parent could not (the child then
// makes the file itself). `from` -1: a pending child that cannot read that file; the parent
// gives it the file it made (or makes now) from the one it holds, else refuses.
int drained_child_file(int from, const DrainChild& c, int* k);
// This process image's own file from the record parent listening on SPROFIL_DRAIN
// (kDrainNewFile), made in dirfd (O_PATH, the run's directory) under `name` (first: the run's
// first image) or name.PID[.k], its first page reserved. The fd (close-on-exec) and *k, or
// -1: no record parent, or it could not (the agent then makes the file itself). Any clock:
// the parent listens whenever the perf clock may run.
// With period_ns (not 0) and where drain mode is asked for (drain_asked), the calling thread's
// event goes with it, for arm_thread to adopt (take_early): one exchange instead of two.
int drained_new_file(int dirfd, const char* name, bool first, int* k, uint64_t period_ns);
// Whether SPROFIL_PERF_MODE asks for drain mode (unset, empty or "drain"), and whether
// SPROFIL_JITTER leaves the period re-draws on (not "0"): prepare()'s reading, and
// drained_new_file's for the event it hands over early.
bool drain_asked();
bool jitter_asked();
// Whether the main thread's event at period_ns went with this image's file (a perf clock at
// that period works: resolve_auto need not probe), and, for tid, takes it (once).
bool early_handed(uint64_t period_ns);
// The agent's records have no arrays this process may count into (drain mode's lazy arrays,
// agent/state.hpp): the perf clock then starts in drain mode or not at all, never with a
// signal per sample (after a failed exec, when the record parent is gone).
void set_drain_only(bool only);
bool take_early(pid_t tid, uint64_t period_ns);

// Where signal mode's tables by fd lie (1 MiB of bss that a process touches a page of at a
// time, by the fds it uses): a prefault of the library's data leaves them out.
void fd_tables(const void** begin, const void** end);

// Whether the running (or just prepared) perf clock is in drain mode: it takes no signal
// (perf_clock.cpp, with the runtime mutex held).
bool drain_mode();

// Whether an exec ends this process's sampling by itself, with nothing to stop or flush: a
// forked child without its own file yet (its flush would carry no end fields of a file of its
// own) in drain mode, every event of which the kernel removes at the exec (remove_on_exec)
// and no thread of which is sampled another way (kept_at_exec). The parent drains each
// event to its end when it sees it end (record/drain_ends.cpp, event_ended()). A failed exec then
// leaves everything as it was. (g_mu)
bool exec_removes_events();
// A thread of this process is sampled by something an exec does not remove (an event
// without remove_on_exec, a signal-mode event, a timer): its exec stops the clock. (g_mu)
void kept_at_exec();

}  // namespace sprofil::rt::perf
