// Cost per sample at the real signal level.
//
// A fixed CPU-bound loop is run (a) with no timer, (b) with a per-thread timer
// (timer_create + SIGEV_THREAD_ID) delivering SIGPROF to an empty handler (the floor), and
// (c) with the real sprofil runtime (sprofil_start on a session of 1 or 10,000 regions) at
// the same rate. The loop's thread CPU time (CLOCK_THREAD_CPUTIME_ID: user + system, so
// signal delivery and the handler are included) is measured per run; the per-signal cost is
// (median CPU with signals - median CPU without) / median signals.
//
// Signals are counted exactly: the empty handler counts them; for sprofil a counting wrapper
// is put in front of the runtime's own handler after sprofil_start (the wrapper's increment
// is the same work as the empty handler's, so it cancels in the ratio).
//
// Rates: CPU-time timers fire from the scheduler tick, so they deliver at most one signal per
// tick (CONFIG_HZ, 250 here) and fold the rest into si_overrun; at 1000 Hz that is 250
// signals a second and a 0.1% effect, below run-to-run noise. A CLOCK_MONOTONIC
// (hrtimer) per-thread timer at 20 kHz amplifies the effect 80x for a precise figure; the
// sprofil runtime offers the same clock as SPROFIL_CLOCK_WALL.
//
// Usage: bench_signal [runs (default 7)] [work iterations (default: about 0.4 s)]
#include <signal.h>
#include <sprofil/sprofil.h>
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

#include "bench_util.hpp"
#include "clock/runtime.hpp"

extern "C" char __executable_start;
extern "C" char etext;

namespace {

using bench::g_signals;
using bench::median;
using bench::now_ns;
using bench::work;

struct Result {
  uint64_t cpu_ns, signals, overruns;
};

// A per-thread timer on `clock` (CLOCK_THREAD_CPUTIME_ID or CLOCK_MONOTONIC) sending SIGPROF
// to this thread every interval_ns, with the empty handler; interval 0: no timer.
Result run_raw(uint64_t iters, clockid_t clock, uint64_t interval_ns) {
  timer_t tm{};
  if (interval_ns) {
    bench::set_handler(SIGPROF, bench::empty_handler);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
    if (timer_create(clock, &sev, &tm) != 0) {
      perror("timer_create");
      std::exit(1);
    }
    const timespec iv{static_cast<time_t>(interval_ns / 1000000000u),
                      static_cast<long>(interval_ns % 1000000000u)};
    const itimerspec its{iv, iv};
    timer_settime(tm, 0, &its, nullptr);
  }
  const bench::Timed r = bench::timed_work(iters);
  if (interval_ns) {
    timer_delete(tm);
    bench::reset_sigprof();
  }
  return Result{r.thread_ns, r.signals, r.overruns};
}

// The real runtime: sprofil_start on `s`, with the counting wrapper in front of its handler.
Result run_sprofil(uint64_t iters, sprofil_session* s) {
  sprofil_reset(s);
  if (sprofil_start(s) != 0) {
    perror("sprofil_start");
    std::exit(1);
  }
  const int sig = sprofil::rt::signal_number();
  const struct sigaction cur = bench::wrap_runtime_handler(sig);
  const bench::Timed r = bench::timed_work(iters);
  sprofil::rt::real_sigaction(sig, &cur, nullptr);
  sprofil_stop(s);
  return Result{r.thread_ns, r.signals, r.overruns};
}

// Delivery without a timer interrupt: this thread sends itself n SIGPROFs with tgkill (the
// empty handler runs each time). Returns CPU ns per signal (syscall + delivery + sigreturn).
double tgkill_ns_per_signal(int n) {
  bench::set_handler(SIGPROF, bench::empty_handler);
  const pid_t pid = getpid(), tid = static_cast<pid_t>(syscall(SYS_gettid));
  g_signals = 0;
  const uint64_t t0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  for (int i = 0; i < n; ++i) syscall(SYS_tgkill, pid, tid, SIGPROF);
  const uint64_t dt = now_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
  signal(SIGPROF, SIG_DFL);
  if (g_signals.load() != static_cast<uint64_t>(n)) std::fprintf(stderr, "tgkill: lost signals\n");
  return static_cast<double>(dt) / n;
}

sprofil_session* make_session(unsigned hz, sprofil_clock clock, size_t nregions) {
  sprofil_options o;
  sprofil_options_init(&o);
  o.hz = hz;
  o.clock = clock;
  sprofil_session* s = sprofil_create(&o);
  if (!s) {
    perror("sprofil_create");
    std::exit(1);
  }
  // nregions equal pieces over this executable's text (the work loop is in one of them).
  const auto lo = reinterpret_cast<uintptr_t>(&__executable_start);
  const auto hi = reinterpret_cast<uintptr_t>(&etext);
  uintptr_t len = ((hi - lo) / nregions) & ~uintptr_t{15};
  if (len < 16) len = 16;
  for (size_t i = 0; i < nregions; ++i) {
    const uintptr_t a = lo + i * len;
    const uintptr_t b = i + 1 == nregions ? std::max(hi, a + len) : a + len;
    if (sprofil_add_range(s, reinterpret_cast<void*>(a), reinterpret_cast<void*>(b), "") != 0) {
      perror("sprofil_add_range");
      std::exit(1);
    }
  }
  return s;
}

struct Mode {
  std::string name;
  std::string rate;
  bool is_sprofil;
  clockid_t clock;
  uint64_t interval_ns;
  sprofil_session* session;
  std::vector<uint64_t> cpu{}, sig{}, ovr{};
};

}  // namespace

int main(int argc, char** argv) {
  const auto [runs, iters] = bench::parse_args(argc, argv);
  const auto cpu_clock = CLOCK_THREAD_CPUTIME_ID;
  const uint64_t ms = 1000000;
  std::fprintf(stderr, "building sessions (10,000 regions takes a few seconds)...\n");
  sprofil_session* cpu1k_1 = make_session(1000, SPROFIL_CLOCK_CPU, 1);
  sprofil_session* cpu1k_10k = make_session(1000, SPROFIL_CLOCK_CPU, 10000);
  sprofil_session* cpumax_1 = make_session(100000, SPROFIL_CLOCK_CPU, 1);
  sprofil_session* cpumax_10k = make_session(100000, SPROFIL_CLOCK_CPU, 10000);
  sprofil_session* wall_1 = make_session(20000, SPROFIL_CLOCK_WALL, 1);
  sprofil_session* wall_10k = make_session(20000, SPROFIL_CLOCK_WALL, 10000);

  // Aggregate initialisation: the measurements (cpu, sig, ovr) start empty.
  std::vector<Mode> modes = {
      {"no timer (baseline)", "-", false, cpu_clock, 0, nullptr},
      {"empty handler", "CPU 1000 Hz", false, cpu_clock, ms, nullptr},
      {"sprofil, 1 region", "CPU 1000 Hz", true, cpu_clock, ms, cpu1k_1},
      {"sprofil, 10,000 regions", "CPU 1000 Hz", true, cpu_clock, ms, cpu1k_10k},
      {"empty handler", "CPU 100 kHz (max)", false, cpu_clock, 10000, nullptr},
      {"sprofil, 1 region", "CPU 100 kHz (max)", true, cpu_clock, 10000, cpumax_1},
      {"sprofil, 10,000 regions", "CPU 100 kHz (max)", true, cpu_clock, 10000, cpumax_10k},
      {"empty handler", "wall 20 kHz", false, CLOCK_MONOTONIC, 50000, nullptr},
      {"sprofil, 1 region", "wall 20 kHz", true, CLOCK_MONOTONIC, 50000, wall_1},
      {"sprofil, 10,000 regions", "wall 20 kHz", true, CLOCK_MONOTONIC, 50000, wall_10k},
  };
  std::vector<uint64_t> tgk;
  // Round robin, so that drift (other load, frequency) spreads over every mode alike.
  work(iters / 4);  // warm up
  for (int r = 0; r < runs; ++r) {
    for (Mode& m : modes) {
      const Result res =
          m.is_sprofil ? run_sprofil(iters, m.session) : run_raw(iters, m.clock, m.interval_ns);
      m.cpu.push_back(res.cpu_ns);
      m.sig.push_back(res.signals);
      m.ovr.push_back(res.overruns);
    }
    tgk.push_back(static_cast<uint64_t>(tgkill_ns_per_signal(100000)));
    std::fprintf(stderr, "run %d/%d done\n", r + 1, runs);
  }

  const double base = bench::median_d(modes[0].cpu);
  bench::FloorRatio floor = bench::table_start(
      iters, runs, base,
      "| handler | timer | CPU ms (median) | signals | overruns | signals/CPU s | overhead "
      "| ns per signal | vs empty |",
      2);
  for (const Mode& m : modes) {
    const double cpu = bench::median_d(m.cpu), sig = bench::median_d(m.sig);
    if (m.interval_ns == 0) {
      std::printf("| %s | %s | %.1f | 0 | 0 | 0 | - | - | - |\n", m.name.c_str(), m.rate.c_str(),
                  cpu / 1e6);
      continue;
    }
    char ratio[32];
    const double per = floor.row(cpu, base, sig, !m.is_sprofil, ratio);
    const double ovr = bench::median_d(m.ovr);
    std::printf("| %s | %s | %.1f | %.0f | %.0f | %.0f | %+.2f%% | %.0f | %s |\n", m.name.c_str(),
                m.rate.c_str(), cpu / 1e6, sig, ovr, sig / (cpu / 1e9), 100.0 * (cpu - base) / base,
                per, ratio);
  }
  std::printf(
      "\nself-signal floor (tgkill to self, empty handler, no timer interrupt): %llu ns per "
      "signal (median of %d x 100,000)\n",
      static_cast<unsigned long long>(median(tgk)), runs);
  for (sprofil_session* s : {cpu1k_1, cpu1k_10k, cpumax_1, cpumax_10k, wall_1, wall_10k})
    sprofil_destroy(s);
  return 0;
}
