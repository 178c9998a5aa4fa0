// Runtime smoke test at the real signal level, through the modern C API: a thread burning
// CPU gets count x tick equal to its own measured thread CPU time (a CPU-time ratio, not a
// timing threshold).
#include <gtest/gtest.h>
#include <sprofil/sprofil.h>
#include <time.h>

#include <cstdint>
#include <thread>

#include "clock/runtime.hpp"

namespace sprofil::clock_test {
extern "C" char __executable_start;
extern "C" char etext;

namespace {

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

volatile uint64_t g_sink;

// Burns about `ns` of this thread's CPU time in this executable's own code.
__attribute__((noinline)) uint64_t burn(uint64_t ns) {
  const uint64_t t0 = thread_cpu_ns();
  uint64_t x = 1;
  while (thread_cpu_ns() - t0 < ns) {
    for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    g_sink = x;
  }
  return thread_cpu_ns() - t0;
}

struct SnapSum {
  uint64_t counts = 0, delivered = 0, outside = 0, lost = 0, tick_ns = 0;
};

SnapSum sum(sprofil_session* s) {
  sprofil_snapshot* snap = sprofil_snapshot_take(s);
  SnapSum r;
  if (!snap) return r;
  for (size_t i = 0; i < snap->nregions; ++i)
    for (size_t b = 0; b < snap->regions[i].nbins; ++b) r.counts += snap->regions[i].counts[b];
  r.delivered = snap->delivered;
  r.outside = snap->outside;
  r.lost = snap->lost;
  r.tick_ns = snap->tick_ns;
  sprofil_snapshot_free(snap);
  return r;
}

TEST(RuntimeSmoke, CountTimesTickMatchesThreadCpuTime) {
  sprofil_session* s = sprofil_create(nullptr);
  ASSERT_NE(s, nullptr);
  // The whole text of this executable: the burn loop, but not libc (clock_gettime's vDSO).
  ASSERT_EQ(sprofil_add_range(s, &__executable_start, &etext, "exe"), 0);
  ASSERT_EQ(sprofil_start(s), 0);
  EXPECT_NE(sprofil::rt::signal_number(), 0);
  EXPECT_GE(sprofil::rt::armed_threads(), 1);

  uint64_t cpu_ns = 0;
  std::thread t([&cpu_ns] { cpu_ns = burn(300000000); });
  t.join();
  ASSERT_EQ(sprofil_stop(s), 0);
  const SnapSum r = sum(s);
  sprofil_destroy(s);

  ASSERT_GT(r.tick_ns, 0u);
  EXPECT_EQ(r.tick_ns, 1000000u);  // default 1000 Hz
  EXPECT_EQ(r.lost, 0u);
  // Samples of the burning thread in libc/vDSO (clock_gettime) are "outside"; samples of
  // the main thread (blocked in join) are none. Compare all samples taken against the time.
  const double sampled = static_cast<double>(r.delivered) * static_cast<double>(r.tick_ns);
  const double ratio = sampled / static_cast<double>(cpu_ns);
  RecordProperty("cpu_ns", std::to_string(cpu_ns));
  RecordProperty("delivered", std::to_string(r.delivered));
  RecordProperty("counts", std::to_string(r.counts));
  EXPECT_GT(ratio, 0.9) << "delivered " << r.delivered << " cpu_ns " << cpu_ns;
  EXPECT_LT(ratio, 1.1) << "delivered " << r.delivered << " cpu_ns " << cpu_ns;
  // Most of the burn is in our own loop, inside the range.
  EXPECT_GT(static_cast<double>(r.counts), 0.5 * static_cast<double>(r.delivered));
  EXPECT_EQ(r.counts + r.outside, r.delivered);
}

}  // namespace

}  // namespace sprofil::clock_test
