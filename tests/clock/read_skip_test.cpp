// Signal mode's read skip (perf::overflow_without_read, src/clock/perf.hpp) on simulated
// threads: a task-clock counter whose overflows fall on a grid of whole periods, dropped when
// they fall in the kernel; each user-space overflow delivers a signal after some kernel time
// (the delivery), and the handler either reads the counter or takes it from the anchor. The
// monotonic clock runs with the counter, and on alone while the thread is off its CPU.
// The skip must never claim an overflow that was not the only one since the last counted, and
// must skip most reads in a thread that runs user code undisturbed.
#include <gtest/gtest.h>

#include <cstdint>

#include "clock/perf.hpp"
#include "util/xorshift.hpp"

namespace sprofil::clock_test {
namespace {

using rt::perf::Anchor;
using rt::perf::Credit;

constexpr uint64_t kP = 100000;           // 10 kHz
constexpr uint64_t kReadNs = 1400;        // a read(2) of the counter
constexpr uint64_t kIoctlNs = 1500;       // the re-draw's ioctl, after the read
constexpr uint64_t kHandlerNs = 2000;     // the rest of the handler (user time)
constexpr uint64_t kMaxWrongGrid = 4000;  // how far the anchor's grid may trail the kernel's

struct Thread {
  bool skip = true;
  uint64_t rng = 0x2545f4914f6cdd1dull;
  // The kernel: the counter, the monotonic clock, the overflows' grid.
  uint64_t counter = 0, wall = 1000000000, len = kP, next = kP;
  uint64_t dropped_since = 0;  // overflows dropped in the kernel since the last signal
  uint64_t dropped_total = 0;
  // The handler's state.
  Anchor anchor;
  Credit credit;
  uint64_t restart = 0, cur = kP, block_left = 2;
  // Results.
  uint64_t signals = 0, skipped = 0, wrong = 0, far = 0, credited = 0, system = 0;

  uint64_t draw(uint64_t lo, uint64_t hi) {
    return lo + (util::xorshift(&rng) >> 8) % (hi - lo + 1);
  }

  void kernel(uint64_t ns) {  // CPU time in the kernel: its overflows are dropped
    counter += ns;
    wall += ns;
    for (; next <= counter; next += len) ++dropped_since;
  }
  void off_cpu(uint64_t ns) { wall += ns; }
  void user(uint64_t ns) {  // each overflow signals; the handler's own time is user time too
    uint64_t left = ns;
    while (counter + left >= next) {
      left -= next - counter;
      wall += next - counter;
      counter = next;
      const uint64_t grid = next;
      next += len;
      kernel(draw(kP / 5, kP / 2));  // the delivery: timer interrupt, signal frame
      handle(grid);
      left += kHandlerNs;
    }
    wall += left;
    counter += left;
  }
  void handle(uint64_t grid) {
    ++signals;
    const uint64_t now = wall;
    uint64_t value = 0;
    const bool redraw = --block_left == 0;
    const bool read =
        !skip || redraw || !rt::perf::overflow_without_read(&anchor, cur, now, &value);
    if (read) {
      kernel(kReadNs);
      value = counter;
    } else {
      ++skipped;
      if (dropped_since != 0) ++wrong;                          // another overflow passed unseen
      if (value > grid || grid - value > kMaxWrongGrid) ++far;  // not this overflow's counter
    }
    uint64_t sys = 0;
    credited += rt::perf::credit(value, kP, &credit, &sys);
    system += sys;
    credit.next_ns = 0;
    if (redraw) {  // as the handler's jitter(): a new period from the ioctl on
      block_left = draw(16, 48);
      cur = rt::perf::jittered_period(kP, &rng);
      credit.next_ns = cur;
      kernel(kIoctlNs);
      len = cur;
      next = counter + len;
      restart = value;  // the handler knows the read's counter, not the ioctl's
    }
    if (read) rt::perf::anchor_at(&anchor, now, value, restart, cur);
    dropped_total += dropped_since;
    dropped_since = 0;  // the handler now knows the counter past any overflow dropped so far
  }
};

// A thread that runs user code undisturbed: most signals skip the read, none wrongly.
TEST(ReadSkip, UserCodeSkipsMostReadsAndNeverMisses) {
  Thread t;
  t.user(20000 * kP);
  EXPECT_EQ(t.wrong, 0u);
  EXPECT_EQ(t.far, 0u);
  // Reads left: the re-draws and the signal after each. The simulation re-draws after 16 to 48
  // signals (the schedule's shortest blocks, a young thread at 1 kHz; at 10 kHz they are ten
  // times longer): the most reads the skip leaves.
  EXPECT_GT(static_cast<double>(t.skipped), 0.85 * static_cast<double>(t.signals))
      << t.skipped << " of " << t.signals;
}

// User code broken by kernel time (some of it over whole periods), and by time off the CPU:
// the skip never claims an overflow when one was dropped in between, and the weights and their
// kernel part come out as with a read at every signal.
TEST(ReadSkip, KernelAndOffCpuTimeAreNeverSkippedOver) {
  Thread with, without;
  without.skip = false;
  for (Thread* t : {&with, &without}) {
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 20000; ++i) {
      t->user(kP / 4 + (util::xorshift(&r) >> 8) % (3 * kP));
      const uint64_t k = (util::xorshift(&r) >> 8) % 8;
      if (k < 3) t->kernel((util::xorshift(&r) >> 8) % (k == 0 ? 2 * kP : kP / 3));
      if (k == 3) t->off_cpu((util::xorshift(&r) >> 8) % (4 * kP));
      if (k == 4) t->off_cpu((util::xorshift(&r) >> 8) % 40000);
    }
    t->user(2 * kP);  // a last signal
  }
  EXPECT_EQ(with.wrong, 0u);
  EXPECT_EQ(with.far, 0u);
  EXPECT_GT(with.skipped, with.signals / 4) << with.skipped << " of " << with.signals;
  // The same program with and without the skip (the reads themselves are kernel time, so the
  // two runs drift apart): every period is credited (to within the time after the last
  // signal), and the kernel part is as with a read at every signal. (Both credit more kernel
  // periods than were dropped, by the same excess: the partial periods this simulation's
  // re-draws cut short, which the handler's jitter() shortens the new period by.)
  for (const Thread* t : {&with, &without}) {
    const char* which = t->skip ? "with the skip" : "without";
    EXPECT_LE(t->credited, t->counter / kP) << which;
    EXPECT_GE(t->credited + 3, t->counter / kP) << which;
  }
  const auto excess = [](const Thread& t) {
    return static_cast<double>(t.system) - static_cast<double>(t.dropped_total);
  };
  EXPECT_NEAR(excess(with), excess(without), 0.01 * static_cast<double>(without.dropped_total));
  EXPECT_NEAR(static_cast<double>(with.dropped_total), static_cast<double>(without.dropped_total),
              0.02 * static_cast<double>(without.dropped_total));
}

}  // namespace
}  // namespace sprofil::clock_test
