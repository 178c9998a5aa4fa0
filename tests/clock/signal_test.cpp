// The profiling signal: SIGPROF unless the application has a handler on it, then a free
// real-time signal; an application handler is never replaced (EBUSY where only SIGPROF will
// do); the previous disposition comes back when profiling stops; signals that are not ours are
// never counted. Uses the modern C API in this process (tests run one per process).
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>

#include <sprofil/sprofil.h>
#include <atomic>
#include <cerrno>
#include <cstdlib>

namespace sprofil::clock_test {
namespace {

std::atomic<int> g_app_signals{0};
void app_handler(int) {
  g_app_signals.fetch_add(1);
}

double thread_cpu() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

extern "C" __attribute__((noinline)) double sig_burn(double seconds) {
  const double end = thread_cpu() + seconds;
  double x = 1;
  do {
    for (int i = 0; i < 100000; ++i) x = x * 1.0000001 + 1e-9;
  } while (thread_cpu() < end);
  return x;
}

struct Session {
  explicit Session(sprofil_clock clock, unsigned hz = 0) {
    sprofil_options o;
    sprofil_options_init(&o);
    o.clock = clock;
    if (hz) o.hz = hz;
    s = sprofil_create(&o);
    EXPECT_EQ(sprofil_add_function(s, reinterpret_cast<const void*>(&sig_burn)), 0);
  }
  ~Session() { sprofil_destroy(s); }
  uint64_t delivered() {
    sprofil_snapshot* snap = sprofil_snapshot_take(s);
    const uint64_t d = snap->delivered;
    sprofil_snapshot_free(snap);
    return d;
  }
  sprofil_session* s;
};

struct sigaction current(int sig) {
  struct sigaction sa;
  sigaction(sig, nullptr, &sa);
  return sa;
}

TEST(Signal, DispositionRestoredAndForeignSignalsNotCounted) {
  ASSERT_EQ(current(SIGPROF).sa_handler, SIG_DFL);
  {
    // 10 Hz: the clock keeps running while the 50 signals below are raised, and at 1000 Hz a
    // real sample landed among them under load (CI: 4 counted, the weight of one timer signal
    // whose expiries the kernel's tick had folded together). At 10 Hz a real sample during
    // their fraction of a millisecond of CPU is rare and counts 1.
    Session p(SPROFIL_CLOCK_CPU, 10);
    ASSERT_EQ(sprofil_start(p.s), 0);
    sig_burn(0.35);
    // A SIGPROF sent by someone else (SI_USER) reaches our handler and is not counted.
    const double cpu0 = thread_cpu();
    const uint64_t before = p.delivered();
    for (int i = 0; i < 50; ++i) raise(SIGPROF);
    const uint64_t after = p.delivered();
    EXPECT_LE(after - before, 1u) << (thread_cpu() - cpu0) * 1e3 << " ms of CPU";
    ASSERT_EQ(sprofil_stop(p.s), 0);
    EXPECT_GT(before, 0u);
  }
  // Stopped: SIGPROF is SIG_DFL again (and no pending sample kills us).
  EXPECT_EQ(current(SIGPROF).sa_handler, SIG_DFL);
  sig_burn(0.02);
}

TEST(Signal, ApplicationHandlerIsKeptAndARealTimeSignalIsUsed) {
  struct sigaction app {};
  app.sa_handler = app_handler;
  sigemptyset(&app.sa_mask);
  ASSERT_EQ(sigaction(SIGPROF, &app, nullptr), 0);
  {
    Session p(SPROFIL_CLOCK_CPU);
    ASSERT_EQ(sprofil_start(p.s), 0) << "a free real-time signal should have been chosen";
    EXPECT_EQ(current(SIGPROF).sa_handler, app_handler);
    sig_burn(0.2);
    ASSERT_EQ(sprofil_stop(p.s), 0);
    // About 200 samples at 1000 Hz; none of them reached the application's handler.
    EXPECT_GT(p.delivered(), 100u);
    EXPECT_EQ(g_app_signals.load(), 0);
  }
  EXPECT_EQ(current(SIGPROF).sa_handler, app_handler);

  // ITIMER_PROF can only send SIGPROF, and SPROFIL_SIGNAL=SIGPROF asks for it: both refuse.
  {
    Session p(SPROFIL_CLOCK_ITIMER);
    errno = 0;
    EXPECT_EQ(sprofil_start(p.s), -1);
    EXPECT_EQ(errno, EBUSY);
  }
  setenv("SPROFIL_SIGNAL", "SIGPROF", 1);
  {
    Session p(SPROFIL_CLOCK_CPU);
    errno = 0;
    EXPECT_EQ(sprofil_start(p.s), -1);
    EXPECT_EQ(errno, EBUSY);
  }
  unsetenv("SPROFIL_SIGNAL");
  EXPECT_EQ(current(SIGPROF).sa_handler, app_handler);
  EXPECT_EQ(g_app_signals.load(), 0);
}

}  // namespace

}  // namespace sprofil::clock_test
