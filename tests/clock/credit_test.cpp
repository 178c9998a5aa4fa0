// perf::credit with the steal check (src/clock/perf.hpp), on simulated threads: a task-clock
// counter that runs with the thread's CPU clock, in user space (one overflow per period) and
// in the kernel (no overflow), and runs on alone while the host steals the virtual CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "clock/perf.hpp"
#include "util/xorshift.hpp"

namespace sprofil::clock_test {
namespace {

constexpr uint64_t kP = 100000;  // 10 kHz

// One thread as signal mode weighs it: the counter and the CPU clock read at each overflow.
struct Thread {
  uint64_t counter = 0, cpu = 0;
  uint64_t credited = 0, system = 0, overflows = 0;
  rt::perf::Credit c;

  Thread() { rt::perf::base_at_open(0, 0, &c); }  // its event opened as it started

  void overflow() {
    ++overflows;
    const uint64_t v = rt::perf::steal_free(counter, kP, kP, &c, [this] { return cpu; });
    uint64_t sys = 0;
    credited += rt::perf::credit(v, kP, &c, &sys);
    system += sys;
  }
  void user(uint64_t periods) {  // each period ends in user space: one overflow
    for (uint64_t i = 0; i < periods; ++i) {
      counter += kP;
      cpu += kP;
      overflow();
    }
  }
  void kernel(uint64_t ns) {  // CPU time in the kernel: the overflows are dropped
    counter += ns;
    cpu += ns;
  }
  void stolen(uint64_t ns) { counter += ns; }  // the host runs another vCPU: no CPU time
};

TEST(Credit, WithoutStealEveryPeriodIsCreditedAndTheKernelOnesAsSuch) {
  Thread t;
  for (int round = 0; round < 100; ++round) {
    t.user(30);
    t.kernel(7 * kP + kP / 3);
  }
  t.user(1);
  // 3,000 + 1 user periods and 733 kernel ones (100 x 7.33): all credited, none taken as steal.
  EXPECT_EQ(t.c.stolen, 0u);
  EXPECT_EQ(t.credited, t.counter / kP);
  EXPECT_NEAR(static_cast<double>(t.system), 733.0, 1.0);
}

TEST(Credit, StealIsLeftOutOfTheCreditsAndOfTheKernelPart) {
  Thread t;
  for (int round = 0; round < 100; ++round) {
    t.user(30);
    t.kernel(2 * kP);
    t.user(5);
    t.stolen(12 * kP + kP / 2);  // 1.25 ms stolen: 1,250 periods in all, 36% of the counter
  }
  t.user(1);
  // Credited: the CPU time to within the one-period slack, the kernel part its 200 periods.
  const double cpu_periods = static_cast<double>(t.cpu / kP);
  EXPECT_LE(static_cast<double>(t.credited), cpu_periods + 1);
  EXPECT_GE(static_cast<double>(t.credited), cpu_periods - 1);
  EXPECT_NEAR(static_cast<double>(t.system), 200.0, 13.0);  // at most one burst's worth
  EXPECT_GT(t.counter / kP, t.cpu / kP + 1200);             // the counter did run ahead
}

// Steal before the first overflow, with the base taken when the event was opened
// (base_at_open): left out, though the thread had run before (a base taken at the first
// overflow is loose by that much: it cannot tell the time before the open from steal).
TEST(Credit, StealBeforeTheFirstOverflowIsLeftOutWithTheBaseAtOpen) {
  Thread t;
  t.cpu = 500 * kP;  // the thread ran before its event was opened
  rt::perf::base_at_open(t.cpu, 0, &t.c);
  t.stolen(700 * kP);
  t.user(300);
  EXPECT_LE(t.credited, 301u);
  EXPECT_GE(t.credited, 299u);
  EXPECT_LE(t.system, 1u);
}

// The jittered periods keep the rate asked on average (so a jittered event takes as many
// overflows as perf record's fixed period) and stay within [4P/5, 4P/3].
TEST(JitteredPeriod, AverageRateIsTheOneAskedAndTheSpreadIsKept) {
  uint64_t rng = 0x2545f4914f6cdd1dull;
  for (const uint64_t p : {kP, uint64_t{1000000}, uint64_t{52631}}) {
    double rate = 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    constexpr int kDraws = 200000;
    for (int i = 0; i < kDraws; ++i) {
      const uint64_t d = rt::perf::jittered_period(p, &rng);
      rate += 1.0 / static_cast<double>(d);
      lo = d < lo ? d : lo;
      hi = d > hi ? d : hi;
    }
    // 200,000 draws of a rate uniform in [0.75, 1.25]/P: sd of the mean 0.0003/P.
    EXPECT_NEAR(rate / kDraws * static_cast<double>(p), 1.0, 0.002) << "P = " << p;
    EXPECT_GE(lo, p * 4 / 5) << "P = " << p;
    EXPECT_LE(hi, p * 4 / 3 + 1) << "P = " << p;
    EXPECT_LT(lo, p * 81 / 100) << "P = " << p;  // the whole spread is drawn
    EXPECT_GT(hi, p * 132 / 100) << "P = " << p;
  }
}

// At the task clock's floor (rt::perf::kMinPeriodNs, the kernel's shortest hrtimer period for
// a software clock) no period is drawn below it: the kernel would make it that long while the
// sample reported the shorter one.
TEST(JitteredPeriod, NeverBelowTheTaskClocksFloor) {
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  for (const uint64_t p : {rt::perf::kMinPeriodNs, uint64_t{11000}, uint64_t{12500}}) {
    uint64_t lo = UINT64_MAX;
    for (int i = 0; i < 100000; ++i) lo = std::min(lo, rt::perf::jittered_period(p, &rng));
    EXPECT_EQ(lo, rt::perf::kMinPeriodNs) << "P = " << p;
  }
}

}  // namespace
}  // namespace sprofil::clock_test
