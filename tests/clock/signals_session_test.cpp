// A second session never silently changes another's clock or rate. A
// table on the face channel runs the CPU-time clock at 1000 Hz; a modern-API session asking
// for another rate or clock is refused with EBUSY and the running clock is unchanged; one
// asking for the same clock joins it. Also the engine's exchange: it retires instead of
// waiting when a reader count stays raised (a handler stopped inside it).
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>

#include <sprofil/sprofil.h>
#include <cerrno>

#include "clock/runtime.hpp"
#include "engine/engine.hpp"

namespace sprofil::clock_test {
namespace {

extern "C" __attribute__((noinline)) int session_fn(int x) {
  return x * 3 + 1;
}

sprofil_session* session(sprofil_clock clock, unsigned hz) {
  sprofil_options o;
  sprofil_options_init(&o);
  o.clock = clock;
  o.hz = hz;
  sprofil_session* s = sprofil_create(&o);
  EXPECT_EQ(sprofil_add_function(s, reinterpret_cast<const void*>(&session_fn)), 0);
  return s;
}

TEST(SignalsSession, SecondSessionNeverChangesTheRunningClock) {
  using namespace sprofil;
  static uint32_t counts[16];
  engine::Region r;
  r.lo = reinterpret_cast<uintptr_t>(&session_fn);
  r.last = r.lo + 15;
  r.map = engine::BinMap{r.lo, 65536, 0, 0};
  r.counters = engine::Counters{counts, 16, 4, engine::Policy::kSaturate, 0};
  engine::Table* t = nullptr;
  ASSERT_EQ(engine::Table::create(&r, 1, nullptr, nullptr, &t), engine::Error::kOk);
  engine::Table* old = nullptr;
  const rt::ClockRequest cpu1000{rt::ClockKind::kCpu, 1000000};
  ASSERT_EQ(rt::install(engine::kFaceChannel, t, cpu1000, &old), 0);

  for (auto [clock, hz] : {std::pair{SPROFIL_CLOCK_CPU, 100u}, {SPROFIL_CLOCK_WALL, 1000u}}) {
    sprofil_session* s = session(clock, hz);
    errno = 0;
    EXPECT_EQ(sprofil_start(s), -1);
    EXPECT_EQ(errno, EBUSY);
    rt::ClockRequest running;
    ASSERT_TRUE(rt::running_clock(&running));
    EXPECT_EQ(running.kind, rt::ClockKind::kCpu);
    EXPECT_EQ(running.interval_ns, 1000000u);
    sprofil_destroy(s);
  }
  sprofil_session* same = session(SPROFIL_CLOCK_CPU, 1000);
  EXPECT_EQ(sprofil_start(same), 0);
  sprofil_destroy(same);

  ASSERT_EQ(rt::install(engine::kFaceChannel, nullptr, cpu1000, &old), 0);
  engine::Table::destroy(old);
  EXPECT_FALSE(rt::running_clock(nullptr));
}

// The profiling handler runs with every signal blocked: a program handler can never run on
// top of it (and siglongjmp out while the engine's reader count is raised).
TEST(SignalsSession, HandlerRunsWithEverySignalBlocked) {
  sprofil_session* s = session(SPROFIL_CLOCK_CPU, 1000);
  ASSERT_EQ(sprofil_start(s), 0);
  const int sig = sprofil::rt::signal_number();
  ASSERT_GT(sig, 0);
  struct sigaction real;
  ASSERT_EQ(sprofil::rt::real_sigaction(sig, nullptr, &real), 0);
  for (int k = 1; k < NSIG; ++k) {
    if (k == SIGKILL || k == SIGSTOP || (k >= 32 && k < SIGRTMIN)) continue;  // glibc's own
    EXPECT_EQ(sigismember(&real.sa_mask, k), 1) << k;
  }
  // What the program reads of that signal is its own view: the default, never our handler.
  struct sigaction seen;
  ASSERT_EQ(sigaction(sig, nullptr, &seen), 0);
  EXPECT_EQ(seen.sa_handler, SIG_DFL);
  sprofil_destroy(s);
}

// A program timer that signals sprofil's signal makes that signal the program's: sprofil
// moves to another one and keeps sampling; the program reads its own (default) disposition.
TEST(SignalsSession, ProgramTimerOnOurSignalMovesUs) {
  sprofil_session* s = session(SPROFIL_CLOCK_CPU, 1000);
  ASSERT_EQ(sprofil_start(s), 0);
  const int sig = sprofil::rt::signal_number();
  ASSERT_GT(sig, 0);
  sigevent sev{};
  sev.sigev_notify = SIGEV_SIGNAL;
  sev.sigev_signo = sig;
  timer_t t;
  ASSERT_EQ(timer_create(CLOCK_PROCESS_CPUTIME_ID, &sev, &t), 0);
  const int now = sprofil::rt::signal_number();
  EXPECT_GT(now, 0);
  EXPECT_NE(now, sig);
  struct sigaction seen;
  ASSERT_EQ(sigaction(sig, nullptr, &seen), 0);
  EXPECT_EQ(seen.sa_handler, SIG_DFL);
  EXPECT_GT(sprofil::rt::armed_threads(), 0);
  timer_delete(t);
  sprofil_destroy(s);
}

}  // namespace

}  // namespace sprofil::clock_test
