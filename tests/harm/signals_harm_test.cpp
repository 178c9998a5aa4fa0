// "First, do no harm" for signals, timers, masks and fds:
// small programs (progs/sig_*.cpp) run natively and under `sprofil record` with every clock
// must show the same exit status, stdout, stderr and files (harness.hpp), and where sampling
// matters, the profile's samples x tick are compared with the CPU time the program measured.
#include <algorithm>
#include <cmath>
#include <fstream>

#include "harness.hpp"

namespace sprofil::harm_test {
namespace {

// One run with the profile and the program's report ($SIG_REPORT) kept.
struct Kept {
  Outcome o;
  std::string raw_err;  // stderr with sprofil's own lines
  std::string report;
  uint64_t delivered = 0, tick_ns = 0;
};

Kept run_kept(const std::string& clock, const Args& argv, bool shell = false,
              const Args& record_opts = {}, agent_test::Env env = {}) {
  TempDir work, outdir;
  const std::string cwd = work / "w";
  std::filesystem::create_directory(cwd);
  const std::string rep = outdir / "report.txt", prof = outdir / "run.sprof";
  Args a;
  if (!clock.empty()) {
    a = {agent_test::kTool, "record"};
    const Args c = clock_options(clock);
    a.insert(a.end(), c.begin(), c.end());
    a.insert(a.end(), {"-o", prof});
    a.insert(a.end(), record_opts.begin(), record_opts.end());
    a.push_back("--");
  }
  if (shell) a.insert(a.end(), {"/bin/sh", "-c"});
  a.insert(a.end(), argv.begin(), argv.end());
  env.push_back({"SIG_REPORT", rep});
  const agent_test::Result r = agent_test::run(a, env, cwd);
  Kept k;
  k.o.status = r.status;
  k.o.out = r.out;
  k.raw_err = r.err;
  k.o.err = clock.empty() ? r.err : program_stderr(r.err);
  k.o.files = snapshot_dir(cwd);
  std::ifstream in(rep);
  std::ostringstream s;
  s << in.rdbuf();
  k.report = s.str();
  if (!clock.empty()) {
    profile::Profile p;
    std::string why;
    EXPECT_TRUE(profile::read_profile(prof, &p, &why)) << why;
    k.delivered = p.delivered;
    k.tick_ns = p.tick_ns;
  }
  return k;
}

void expect_same(const Kept& native, const Kept& k) {
  EXPECT_EQ(k.o.status, native.o.status) << k.raw_err;
  EXPECT_EQ(k.o.out, native.o.out);
  EXPECT_EQ(k.o.err, native.o.err);
  EXPECT_EQ(k.o.files, native.o.files);
}

// The number after `key` in a report ("key N ..."), or -1.
double field(const std::string& report, const std::string& key) {
  const size_t at = report.find(key + " ");
  return at == std::string::npos ? -1 : std::stod(report.substr(at + key.size() + 1));
}

double sampled_fraction(const Kept& k, double cpu_ns) {
  return static_cast<double>(k.delivered) * static_cast<double>(k.tick_ns) / cpu_ns;
}

// The program's own SIGPROF handler and ITIMER_PROF, installed in main (after the
// agent's constructor), by sigaction and by glibc's signal().
TEST(Signals, OwnSigprofHandlerAndItimerKeepTheirRate) {
  for (const char* mode : {"sigaction", "signal"}) {
    SCOPED_TRACE(mode);
    const Kept native = run_kept("", {SIG_OWN_SIGPROF, mode});
    // The native rate: the median of three runs (see the tolerance below).
    double r[3];
    for (double& x : r) {
      const Kept n = run_kept("", {SIG_OWN_SIGPROF, mode});
      x = field(n.report, "signals") / field(n.report, "cpu");
    }
    std::sort(r, r + 3);
    const double rate0 = r[1];
    ASSERT_GT(rate0, 0);
    for (const std::string& clock : agent_clocks()) {
      SCOPED_TRACE("clock " + clock);
      Kept k = run_kept(clock, {SIG_OWN_SIGPROF, mode});
      expect_same(native, k);
      // Exactly: no signal but its ITIMER_PROF's reaches its handler (sigaction mode prints
      // the count of the others, compared with the native run's 0 by expect_same).
      // Its own signals per CPU-second as natively: ITIMER_PROF at 100 Hz over 0.6 s, about
      // 60 signals. ITIMER_PROF runs on tick-sampled CPU time, which drifts from the precise
      // CPU clock under contention: native runs alone gave 59 to 85 signals at a load average
      // of 6.8 on this 2-core machine, and with two busy loops beside ctest -j3 the native
      // median fell to 31 and the profiled runs gave 43-47: so +-10% (the goal on a quiet
      // machine) is not robust here; half to twice the native median, with an outlier re-run
      // once. The bug this guards against gave ~10x (sprofil's samples reaching the program's
      // handler) or 0.
      double rate = field(k.report, "signals") / field(k.report, "cpu");
      if (std::abs(rate - rate0) > 0.1 * rate0) {
        k = run_kept(clock, {SIG_OWN_SIGPROF, mode});
        rate = field(k.report, "signals") / field(k.report, "cpu");
      }
      EXPECT_GT(rate, 0.5 * rate0) << k.report << native.report;
      EXPECT_LT(rate, 2 * rate0) << k.report << native.report;
      // sprofil still samples: its counts cover the CPU time (generous bounds: the itimer
      // clock moves to the CPU-time timers when the program takes SIGPROF).
      const double f = sampled_fraction(k, field(k.report, "cpu"));
      EXPECT_GT(f, 0.5) << k.raw_err;
      if (clock != "wall") {
        EXPECT_LT(f, 1.5);
      }  // wall also counts time off the CPU
    }
  }
}

// SIGPROF set to SIG_IGN stays ignored (a raise() does not kill) and sprofil
// samples on another signal.
TEST(Signals, IgnoredSigprofStillSampled) {
  const Kept native = run_kept("", {SIG_OWN_SIGPROF, "ign"});
  for (const std::string& clock : agent_clocks()) {
    SCOPED_TRACE("clock " + clock);
    const Kept k = run_kept(clock, {SIG_OWN_SIGPROF, "ign"});
    expect_same(native, k);
    const double f = sampled_fraction(k, field(k.report, "cpu"));
    EXPECT_GT(f, 0.5) << k.raw_err;
    if (clock != "wall") {
      EXPECT_LT(f, 1.5);
    }  // wall also counts time off the CPU
  }
}

// Resetting every signal to SIG_DFL, and fork + reset + exec children, survive.
// The children exec through execl, execlp and execle (the agent's variadic wrappers): each
// exits 7, the last with the 7 from the environment execle passed.
TEST(Signals, ResetAllSignalsAndForkResetExecSurvive) {
  const Outcome native = run_once("", {SIG_RESET_ALL});
  ASSERT_EQ(native.out,
            "child 0: exit 7\nchild 1: exit 7\nchild 2: exit 7\nSIGPROF reads SIG_DFL\n");
  expect_no_harm({SIG_RESET_ALL});
}

// Siglongjmp out of the program's handler (another thread sends it SIGUSR1 as fast
// as it can while sprofil samples at 10 kHz), then 5 dlopen/dlclose cycles. The engine's
// counters say whether an exchange found a reader count left raised: none may be leaked, and
// at most one table retired (a sampling thread preempted inside the handler at that moment is
// legitimate; a count left raised retires every later one). With the handler's sa_mask empty,
// a variant of this program with SA_NODEFER got "retired 10" under the perf clock, but that
// variant could overflow its own stack with nested handlers; this one rarely hits the window
// on this machine, so the direct check of the cause is tests/clock (the handler's sa_mask).
// The perf clock runs in signal mode here: in drain mode, record's default, no handler runs
// and the agent publishes no table after its start (docs/agent.md).
TEST(Signals, SiglongjmpOutOfHandlerLeavesNoReader) {
  const Kept native = run_kept("", {SIG_LONGJMP});
  ASSERT_EQ(native.o.out, "cycles 5\n") << native.o.status << " " << native.raw_err;
  for (const std::string& clock : agent_clocks()) {
    SCOPED_TRACE("clock " + clock);
    const Kept k =
        run_kept(clock, {SIG_LONGJMP}, false, {"-F", "10000"}, {{"SPROFIL_PERF_MODE", "signal"}});
    expect_same(native, k);
    ASSERT_GE(field(k.report, "exchanges"), 10) << k.report;
    EXPECT_LE(field(k.report, "retired"), 1) << k.report;
    EXPECT_EQ(field(k.report, "leaked"), 0) << k.report;
    EXPECT_GT(field(k.report, "jumps"), 0) << k.report;
  }
}

// Workers created with every signal blocked are sampled (or the warning says why
// not), and the program reads its full mask back.
TEST(Signals, BlockedWorkersSampledOrWarned) {
  const Kept native = run_kept("", {SIG_BLOCKED, "workers"});
  for (const std::string& clock : agent_clocks()) {
    SCOPED_TRACE("clock " + clock);
    const Kept k = run_kept(clock, {SIG_BLOCKED, "workers"});
    expect_same(native, k);
    const double f = sampled_fraction(k, field(k.report, "cpu"));
    const bool warned = k.raw_err.find("is not sampled") != std::string::npos;
    // 0.6 s of CPU in two workers: at least 70% of it in counts (the rest: thread start-up
    // and the shared machine), unless sprofil said why not.
    EXPECT_TRUE(warned || f > 0.7) << "sampled " << f << "\n" << k.raw_err;
    if (clock != "wall") {
      EXPECT_LT(f, 1.5);
    }  // wall also counts the main thread's wait
  }
}

// A thread in sigtimedwait on a full set never receives sprofil's signal.
TEST(Signals, SigtimedwaitNeverReceivesTheProfilingSignal) {
  const Kept native = run_kept("", {SIG_BLOCKED, "sigwait"});
  ASSERT_NE(native.o.out.find("received 0"), std::string::npos);
  for (const std::string& clock : agent_clocks()) {
    SCOPED_TRACE("clock " + clock);
    const Kept k = run_kept(clock, {SIG_BLOCKED, "sigwait"});
    expect_same(native, k);
    EXPECT_EQ(k.report.find("received"), std::string::npos) << k.report;
  }
}

// Under RLIMIT_NOFILE 16 the program opens as many files as natively. The clock
// takes no fd from its budget; fds the agent itself held at main's start (its profile file,
// another area's business) are counted apart.
TEST(Signals, NofileBudgetKeptByTheClock) {
  const std::string cmd = std::string("ulimit -n 16; exec ") + SIG_FDS + " nofile";
  const Kept native = run_kept("", {cmd}, true);
  const double budget = field(native.report, "opened") + field(native.report, "others");
  ASSERT_GT(budget, 5) << native.report;
  for (const std::string& clock : agent_clocks()) {
    SCOPED_TRACE("clock " + clock);
    const Kept k = run_kept(clock, {cmd}, true);
    expect_same(native, k);
    EXPECT_EQ(field(k.report, "opened") + field(k.report, "others"), budget) << k.report;
  }
}

// Threads that end with a raw SYS_exit leak no fd and no timer.
TEST(Signals, SysExitThreadsLeakNothing) {
  expect_no_harm({SIG_FDS, "sysexit"});
}

// sig_short_threads' samples cover its threads' CPU time: at least 0.9 of it (~1000 expected
// samples, binomial sd ~2%), at most 1.3 (thread start-up and exit are CPU time the threads do
// not measure themselves).
void expect_short_threads_sampled(const Kept& k) {
  ASSERT_EQ(k.o.status, 0) << k.raw_err;
  const double cpu = field(k.report, "thread_cpu");
  ASSERT_GT(cpu, 0);
  const double f = sampled_fraction(k, cpu);
  EXPECT_GE(f, 0.9) << k.report;
  EXPECT_LE(f, 1.3) << k.report;
}

// 2000 threads of half a period each: with a random first phase their samples
// cover their CPU time (>= 0.9: ~1000 expected samples, binomial sd ~2%).
// Both perf modes: signal (the handler's random first phase) and drain (record's default,
// The record parent credits a thread's uncredited whole periods when it ends).
// In drain mode a thread whose period boundaries all fell in the kernel (the hand-over of
// its event to the record parent, its exit) has those periods credited at its start routine
// when it ends: without that, 0.80-0.99 from run to run; with it, 1.01-1.17 (its exit is CPU
// time it did not measure).
TEST(Signals, ShortThreadsKeepTheirShare) {
  if (agent_test::perf_probe() != 0) GTEST_SKIP() << "perf_event_open is not allowed here";
  for (const char* mode : {"signal", "drain"}) {
    SCOPED_TRACE(std::string("SPROFIL_PERF_MODE=") + mode);
    setenv("SPROFIL_PERF_MODE", mode, 1);
    const Kept k = run_kept("perf+agent", {SIG_SHORT_THREADS});
    unsetenv("SPROFIL_PERF_MODE");
    // Both modes credit at a thread's end the periods whose overflows fell in the kernel (the
    // agent's own calls right after the event opens, the thread's exit): drain mode in the
    // record parent, signal mode when the thread closes its event (perf.cpp credit_at_close).
    // Measured on the AMD EPYC VM of docs/benchmarks.md, signal mode 0.95-1.02 idle and
    // 0.97-1.02 beside a busy loop (without that credit 0.91-0.96 and 0.88-0.98); drain mode
    // 0.96-1.0 and 0.93-0.98.
    expect_short_threads_sampled(k);
  }
}

// The sampler clock (the fallback where perf events are denied) on the same 2,000 threads of
// half a period: each thread's first period ends at a random phase of its CPU time, and its
// first expiry comes there, so a thread is credited a period with probability 1/2; what ended
// after its last expiry is credited at its end. Before, the phase was lost at a new thread's
// start and the expiry drawn apart from it: 4% of their CPU time.
TEST(Signals, ShortThreadsKeepTheirShareUnderTheSampler) {
  expect_short_threads_sampled(run_kept("sampler", {SIG_SHORT_THREADS}));
}

// Starting threads costs the program about what its events cost, at any draw of their random
// first periods: 400 threads of 0.5 ms each, two at a time, at 1 and 10 kHz, in drain mode
// (record's default) and signal mode. A first period of a few microseconds, shorter than one
// overflow's own cost, livelocked a thread until its period was set back to P: in drain mode
// the whole hand-over to the record parent, in signal mode until its first user-space signal.
// Measured on the 2-core AMD EPYC VM of docs/benchmarks.md, natively 0.24 s of process CPU:
// before perf::first_overflow 2.4 s (drain) and 3.1 s (signal) at 1 kHz, 16 s at 10 kHz;
// after it 0.29-0.57 s, 0.13-0.81 ms per thread. The bound leaves 1.5 ms of CPU per thread
// for its event's opening, hand-over and exit beside twice the native process CPU.
TEST(Signals, ThreadStartsDoNotLivelockOnShortFirstPeriods) {
  if (agent_test::perf_probe() != 0) GTEST_SKIP() << "perf_event_open is not allowed here";
  constexpr int kPairs = 200;
  const std::string pairs = std::to_string(kPairs);
  const Kept native = run_kept("", {SIG_SHORT_THREADS, pairs});
  ASSERT_EQ(native.o.status, 0) << native.raw_err;
  const double native_cpu = field(native.report, "process_cpu");
  ASSERT_GT(native_cpu, 0);
  for (const char* mode : {"drain", "signal"}) {
    for (const char* hz : {"1000", "10000"}) {
      SCOPED_TRACE(std::string("SPROFIL_PERF_MODE=") + mode + " -F " + hz);
      setenv("SPROFIL_PERF_MODE", mode, 1);
      const Kept k = run_kept("perf", {SIG_SHORT_THREADS, pairs}, false, {"-F", hz});
      unsetenv("SPROFIL_PERF_MODE");
      ASSERT_EQ(k.o.status, 0) << k.raw_err;
      const double cpu = field(k.report, "process_cpu");
      EXPECT_LE(cpu, 2 * native_cpu + 3 * kPairs * 1e6)
          << "native " << native_cpu / 1e6 << " ms, profiled " << cpu / 1e6 << " ms\n"
          << k.report;
    }
  }
}

// A program that blocked sprofil's signal passes it blocked to what it starts, as natively:
// the exec'd program and a posix_spawn'd child inherit the mask the program asked for, not
// the real one with which sprofil kept sampling it (src/clock/exec.cpp). Before, each of the
// three printed SIGPROF unblocked under the signal clocks.
TEST(Signals, BlockedSignalStaysBlockedAcrossExecAndSpawn) {
  expect_no_harm({SIG_MASK_EXEC});
  const Outcome native = run_once("", {SIG_MASK_EXEC});
  EXPECT_EQ(native.out,
            "SigBlk:\t0000000004000200\nSigBlk:\t0000000004000200\nSigBlk:\t0000000004000200\n");
}

// A program that ignores SIGPROF passes it ignored to what its shell starts, as natively: dash
// starts a command with vfork, and the vfork child's exec kept the agent's handler, which the
// exec reset to the default (a command's SIGPROF of its own then killed it). The command, env,
// execs grep without the agent (whose own handler /proc would show), and grep prints its SigIgn
// (SIGPROF is bit 27: 0x4000000).
TEST(Signals, IgnoredSigprofStaysIgnoredThroughAVforkExec) {
  const Args argv = {"/bin/bash", "-c",
                     "trap '' PROF; exec /bin/dash -c "
                     "'env -u LD_PRELOAD grep SigIgn /proc/self/status; true'"};
  const Outcome native = run_once("", argv);
  ASSERT_EQ(native.status, 0) << native.err;
  ASSERT_NE(native.out.find("SigIgn:\t0000000004000000"), std::string::npos) << native.out;
  expect_no_harm(argv);
}

// The BSD and System V mask calls, which glibc makes with its internal sigprocmask (not through
// the PLT): the program reads what it would natively, and so does what it starts the way
// Debian's /bin/sh (dash) starts a command (every signal blocked around a vfork, the child
// clearing its mask with sigsetmask before its exec). And such a command is sampled: `sh -c
// 'agent_busy 400; true'` under every clock, its samples at least 80% of its CPU time. Before
// the interposers (src/clock/interpose_signals.cpp), the agent took its signal for still
// blocked at that exec, and the command ran with it blocked: no sample under the signal clocks.
TEST(Signals, BsdMaskCallsAndShellCommandsAreAsNative) {
  expect_no_harm({SIG_BSD_MASK});
  const Outcome native = run_once("", {SIG_BSD_MASK});
  EXPECT_EQ(native.out,
            "0\n4000200\n4000200\n4000000\n0\nSigBlk:\t0000000000000000\n"
            "SigBlk:\t0000000004000000\n");
  for (const std::string& clock : clocks()) {
    SCOPED_TRACE("clock " + clock);
    TempDir outdir;
    const std::string prof = outdir / "run.sprof";
    Args a{agent_test::kTool, "record"};
    const Args c = clock_options(clock);
    a.insert(a.end(), c.begin(), c.end());
    a.insert(a.end(),
             {"-o", prof, "--", "/bin/sh", "-c", std::string("'") + AGENT_BUSY + "' 400; true"});
    const agent_test::Result r = agent_test::run(a, {}, outdir.path());
    ASSERT_EQ(r.status, 0) << r.err;
    profile::Profile p;
    std::string why;
    ASSERT_TRUE(profile::read_profile(prof, &p, &why)) << why;
    const profile::Process* busy = nullptr;
    for (const profile::Process& pr : p.processes)
      if (!pr.argv.empty() && pr.argv[0] == AGENT_BUSY) busy = &pr;
    ASSERT_NE(busy, nullptr) << r.err;
    ASSERT_GT(busy->cpu_ns, 300000000u) << r.err;
    const double covered = double(busy->delivered) * double(p.tick_ns) / double(busy->cpu_ns);
    EXPECT_GE(covered, 0.8) << busy->delivered << " samples for " << busy->cpu_ns / 1e6
                            << " ms of CPU\n"
                            << r.err;
  }
}

// sigpause, System V's and BSD's, which glibc waits in with its internal sigsuspend: each wait
// for an alarm 150 ms away returns once, as natively, under every clock. Before the
// interposers, the wall clock's samples ended the waits: 151 and 148 returns.
TEST(Signals, SigpauseWaitsAsNatively) {
  expect_no_harm({SIG_PAUSE});
  const Outcome native = run_once("", {SIG_PAUSE});
  EXPECT_EQ(native.out, "system v: 1\nbsd: 1\n");
}

}  // namespace
}  // namespace sprofil::harm_test
