// Cost per sample on the perf_event clock, against the floor of that clock.
//
// A fixed CPU-bound loop runs (a) with no event, (b) with a user-space task-clock perf event
// of this thread (the attributes of src/clock/perf.cpp: exclude_kernel, wakeup_events 1)
// whose every overflow sends SIGPROF to this thread (O_ASYNC + F_SETSIG + F_SETOWN_EX) to an
// empty handler: the floor; (c) with the sprofil runtime on SPROFIL_CLOCK_PERF at the same
// rate (signal mode), a counting wrapper in front of its handler as in bench/bench_signal.cpp;
// (d) the same with SPROFIL_JITTER=0 (no PERF_EVENT_IOC_PERIOD re-draw of the period after
// each sample, leaving one read(2) of the counter per signal); (e) the runtime in ring mode
// (SPROFIL_PERF_MODE=ring: no signal, a drainer thread).
// Runs are round robin; medians. Per-sample cost = (median CPU - median baseline CPU) /
// median samples, where CPU is the loop thread's CPU time (signal delivery and handler
// included) and, for ring mode, the process CPU time (the drainer included).
// Last, the two system calls of a period re-draw, timed alone on a running 10 kHz task-clock
// event of this thread (no signal): PERF_EVENT_IOC_PERIOD (it restarts the event's timer)
// and read(2) of the counter, each the median of 5 batches of 20,000 calls, thread CPU.
//
// Usage: cmp-perf-signal-floor [runs (default 7)] [work iterations (default: about 0.4 s)]
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sprofil/sprofil.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../bench_util.hpp"
#include "clock/runtime.hpp"

extern "C" char __executable_start;
extern "C" char etext;

namespace {

using bench::work;

struct Result {
  uint64_t thread_ns, process_ns, samples;
};

// The floor: a task-clock event of this thread signalling SIGPROF to an empty handler.
Result run_floor(uint64_t iters, uint64_t period_ns) {
  int fd = -1;
  if (period_ns) {
    bench::set_handler(SIGPROF, bench::empty_handler);
    perf_event_attr a = bench::task_clock_attr(period_ns);
    const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
    fd = static_cast<int>(syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      perror("perf_event_open");
      std::exit(1);
    }
    f_owner_ex owner{F_OWNER_TID, tid};
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) != 0 ||
        fcntl(fd, F_SETSIG, SIGPROF) != 0 || fcntl(fd, F_SETOWN_EX, &owner) != 0) {
      perror("fcntl");
      std::exit(1);
    }
  }
  if (fd >= 0) ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  const bench::Timed r = bench::timed_work(iters);
  if (fd >= 0) {
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
    close(fd);
    bench::reset_sigprof();
  }
  return Result{r.thread_ns, r.process_ns, r.signals};
}

sprofil_session* make_session(unsigned hz) {
  sprofil_options o;
  sprofil_options_init(&o);
  o.hz = hz;
  o.clock = SPROFIL_CLOCK_PERF;
  sprofil_session* s = sprofil_create(&o);
  if (!s || sprofil_add_range(s, &__executable_start, &etext, "") != 0) {
    perror("sprofil session");
    std::exit(1);
  }
  return s;
}

uint64_t delivered(sprofil_session* s) {
  sprofil_snapshot* snap = sprofil_snapshot_take(s);
  const uint64_t d = snap ? snap->delivered : 0;
  sprofil_snapshot_free(snap);
  return d;
}

// The runtime on the perf clock; ring: SPROFIL_PERF_MODE=ring; no_jitter: SPROFIL_JITTER=0
// (both read when the clock starts).
Result run_sprofil(uint64_t iters, sprofil_session* s, bool ring, bool no_jitter) {
  if (ring)
    setenv("SPROFIL_PERF_MODE", "ring", 1);
  else
    unsetenv("SPROFIL_PERF_MODE");
  if (no_jitter)
    setenv("SPROFIL_JITTER", "0", 1);
  else
    unsetenv("SPROFIL_JITTER");
  sprofil_reset(s);
  if (sprofil_start(s) != 0) {
    perror("sprofil_start");
    std::exit(1);
  }
  struct sigaction cur;
  const int sig = sprofil::rt::signal_number();
  if (!ring) cur = bench::wrap_runtime_handler(sig);
  const bench::Timed r = bench::timed_work(iters);
  if (!ring) sprofil::rt::real_sigaction(sig, &cur, nullptr);  // not the program's claim
  sprofil_stop(s);
  return Result{r.thread_ns, r.process_ns, ring ? delivered(s) : r.signals};
}

// CPU ns per call of PERF_EVENT_IOC_PERIOD and of read(2) on a running task-clock sampling
// event of this thread at 10 kHz (no O_ASYNC: its overflows raise no signal).
void redraw_syscalls() {
  perf_event_attr a = bench::task_clock_attr(100000);
  a.disabled = 0;
  const int fd =
      static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) {
    perror("perf_event_open");
    return;
  }
  constexpr int kCalls = 20000;
  std::vector<uint64_t> ioc, rd;
  for (int b = 0; b < 5; ++b) {
    const uint64_t t0 = bench::now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < kCalls; ++i) {
      uint64_t p = 80000 + static_cast<uint64_t>(i % 53) * 1000;  // within [4P/5, 4P/3]
      ioctl(fd, PERF_EVENT_IOC_PERIOD, &p);
    }
    const uint64_t t1 = bench::now_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < kCalls; ++i) {
      uint64_t v = 0;
      if (read(fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) break;
    }
    const uint64_t t2 = bench::now_ns(CLOCK_THREAD_CPUTIME_ID);
    ioc.push_back((t1 - t0) / kCalls);
    rd.push_back((t2 - t1) / kCalls);
  }
  close(fd);
  std::printf(
      "\nA re-draw's system calls on a running 10 kHz task-clock event (median of 5 x %d "
      "calls, thread CPU): PERF_EVENT_IOC_PERIOD %.0f ns, read(2) of the counter %.0f "
      "ns per call.\n",
      kCalls, bench::median_d(ioc), bench::median_d(rd));
}

const char kTableHead[] =
    "| handler | perf task clock | thread CPU ms | process CPU ms | samples | samples/CPU s "
    "| overhead (process) | ns per sample (process) | vs floor |";

struct Mode {
  const char* name;
  unsigned hz;
  int kind;  // 0 floor (hz 0: baseline), 1 sprofil signal, 2 sprofil ring, 3 signal no jitter
  sprofil_session* session;
  std::vector<uint64_t> thread, process, samples;
};

}  // namespace

int main(int argc, char** argv) {
  const auto [runs, iters] = bench::parse_args(argc, argv);
  sprofil_session* s1k = make_session(1000);
  sprofil_session* s10k = make_session(10000);
  std::vector<Mode> modes = {
      {"no event (baseline)", 0, 0, nullptr, {}, {}, {}},
      {"empty handler (floor)", 1000, 0, nullptr, {}, {}, {}},
      {"sprofil perf, signal", 1000, 1, s1k, {}, {}, {}},
      {"sprofil perf, signal, SPROFIL_JITTER=0", 1000, 3, s1k, {}, {}, {}},
      {"sprofil perf, ring", 1000, 2, s1k, {}, {}, {}},
      {"empty handler (floor)", 10000, 0, nullptr, {}, {}, {}},
      {"sprofil perf, signal", 10000, 1, s10k, {}, {}, {}},
      {"sprofil perf, signal, SPROFIL_JITTER=0", 10000, 3, s10k, {}, {}, {}},
      {"sprofil perf, ring", 10000, 2, s10k, {}, {}, {}},
  };
  work(iters / 4);  // warm up
  for (int r = 0; r < runs; ++r) {
    for (Mode& m : modes) {
      const Result res = m.kind == 0 ? run_floor(iters, m.hz ? 1000000000u / m.hz : 0)
                                     : run_sprofil(iters, m.session, m.kind == 2, m.kind == 3);
      m.thread.push_back(res.thread_ns);
      m.process.push_back(res.process_ns);
      m.samples.push_back(res.samples);
    }
    std::fprintf(stderr, "run %d/%d done\n", r + 1, runs);
  }
  const double tbase = bench::median_d(modes[0].thread);
  const double pbase = bench::median_d(modes[0].process);
  bench::FloorRatio floor = bench::table_start(iters, runs, tbase, kTableHead, 1);
  std::printf("| %s | - | %.1f | %.1f | 0 | 0 | - | - | - |\n", modes[0].name, tbase / 1e6,
              pbase / 1e6);
  for (size_t i = 1; i < modes.size(); ++i) {  // modes[0] is the baseline
    const Mode& m = modes[i];
    const double t = bench::median_d(m.thread), p = bench::median_d(m.process),
                 n = bench::median_d(m.samples);
    char ratio[32];
    const double per = floor.row(p, pbase, n, m.kind == 0, ratio);
    std::printf("| %s | %u Hz | %.1f | %.1f | %.0f | %.0f | %+.2f%% | %.0f | %s |\n", m.name, m.hz,
                t / 1e6, p / 1e6, n, n / (t / 1e9), 100.0 * (p - pbase) / pbase, per, ratio);
  }
  // The same ratio round by round: each run's cost per sample against the same round's floor
  // and baseline (neighbours in the round robin), so a drift of the machine's speed over the
  // runs cancels; the median and range over the rounds.
  std::printf("\nPer round (each run against its round's floor and baseline):\n\n");
  for (size_t i = 1; i < modes.size(); ++i) {
    const Mode& m = modes[i];
    if (m.kind == 0) continue;
    const Mode* fl = nullptr;
    for (const Mode& f : modes)
      if (f.kind == 0 && f.hz == m.hz) fl = &f;
    std::vector<double> r;
    for (size_t k = 0; k < m.process.size(); ++k) {
      const double base = static_cast<double>(modes[0].process[k]);
      const double floor_per =
          fl->samples[k] ? (static_cast<double>(fl->process[k]) - base) / fl->samples[k] : 0;
      const double per =
          m.samples[k] ? (static_cast<double>(m.process[k]) - base) / m.samples[k] : 0;
      if (floor_per > 0) r.push_back(per / floor_per);
    }
    if (r.empty()) continue;
    std::sort(r.begin(), r.end());
    std::printf("- %s, %u Hz: %.2fx the floor (median of %zu rounds; %.2f to %.2f)\n", m.name, m.hz,
                r[r.size() / 2], r.size(), r.front(), r.back());
  }
  redraw_syscalls();
  sprofil_destroy(s1k);
  sprofil_destroy(s10k);
  return 0;
}
