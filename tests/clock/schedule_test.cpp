// The period re-draw schedule (perf::jitter_block, src/clock/perf.hpp), shared by signal mode's
// handler and the record parent: a block spans about the same stretch of the thread's task
// clock at every rate (16 to 48 ms while the thread is young, 48 to 144 ms after), never fewer
// than 16 samples (48 once the thread is not young), and a thread turns old after 0.5 s of
// samples. Draws from the real generator; exact bounds, no timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "clock/perf.hpp"

namespace sprofil::clock_test {
namespace {

struct Span {
  uint64_t lo = ~0ull, hi = 0;
  double mean = 0;
};

// 20,000 blocks drawn for a thread at `period` ns that has taken `samples` samples: their
// lengths in samples.
Span blocks(uint64_t period, uint64_t samples) {
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  Span s;
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t n = rt::perf::jitter_block(&rng, period, samples);
    s.lo = std::min(s.lo, n);
    s.hi = std::max(s.hi, n);
    s.mean += static_cast<double>(n) / kDraws;
  }
  return s;
}

TEST(Schedule, BlocksSpanTheSameTaskClockAtEveryRate) {
  for (const uint64_t hz : {1000u, 4000u, 10000u, 20000u}) {
    const uint64_t p = 1000000000u / hz;
    const Span young = blocks(p, 0), old = blocks(p, 10 * hz);
    // In ns of the thread's CPU at the nominal period: 16-48 ms young, 48-144 ms old.
    EXPECT_EQ(young.lo * p, 16000000u) << hz << " Hz";
    EXPECT_EQ(young.hi * p, 48000000u) << hz << " Hz";
    EXPECT_NEAR(young.mean * static_cast<double>(p), 32e6, 0.5e6) << hz << " Hz";
    EXPECT_EQ(old.lo * p, 48000000u) << hz << " Hz";
    EXPECT_EQ(old.hi * p, 144000000u) << hz << " Hz";
    EXPECT_NEAR(old.mean * static_cast<double>(p), 96e6, 1.5e6) << hz << " Hz";
  }
}

TEST(Schedule, SlowRatesKeepAtLeastSixteenSamplesABlock) {
  // 100 Hz: 16 ms is less than two periods; the blocks stay 16-48 samples (young) and
  // 48-144 (old), as signal mode's at 1 kHz.
  const Span young = blocks(10000000, 0), old = blocks(10000000, 1000);
  EXPECT_EQ(young.lo, 16u);
  EXPECT_EQ(young.hi, 48u);
  EXPECT_EQ(old.lo, 48u);
  EXPECT_EQ(old.hi, 144u);
}

TEST(Schedule, AThreadTurnsOldAfterHalfASecondOfSamples) {
  const uint64_t p = 1000000;  // 1 kHz: 500 samples
  EXPECT_EQ(blocks(p, 499).hi, 48u);
  EXPECT_EQ(blocks(p, 500).hi, 144u);
}

}  // namespace
}  // namespace sprofil::clock_test
